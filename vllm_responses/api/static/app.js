// The playground: POSTs to /v1/responses with stream: true and renders the SSE events as they arrive.

const $ = (id) => document.getElementById(id);
const ui = {
  model: $("model"), code: $("code"), include: $("include"), key: $("key"), newChat: $("new"), extra: $("extra"),
  log: $("log"), form: $("form"), prompt: $("prompt"), send: $("send"), status: $("status"),
};
const KEY_STORAGE = "vllm-responses.apiKey";
const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed", "error"]);
const state = { previousId: null, controller: null };

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = ui.key.value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

function setStatus(text, isError = false) {
  ui.status.textContent = text;
  ui.status.classList.toggle("error", isError);
}

async function httpError(res) {
  try {
    const body = await res.json();
    return `HTTP ${res.status}: ${body.error?.message ?? JSON.stringify(body)}`;
  } catch {
    return `HTTP ${res.status} ${res.statusText}`;
  }
}

async function loadModels() {
  const selected = ui.model.value;
  ui.model.replaceChildren();
  try {
    const res = await fetch("/v1/models", { headers: headers() });
    if (!res.ok) return setStatus(`Could not list models: ${await httpError(res)}`, true);
    for (const { id } of (await res.json()).data) ui.model.append(new Option(id, id, false, id === selected));
    setStatus("");
  } catch (err) {
    setStatus(`Could not list models: ${err.message}`, true);
  }
}

// Server-sent events from a fetch() body: frames end with a blank line; we only need their `data:` lines.
async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r/g, "");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart());
      if (data.length) yield JSON.parse(data.join("\n"));
    }
  }
}

const STATUS_LABEL = { in_progress: "in progress", interpreting: "interpreting", completed: "completed",
  failed: "failed", incomplete: "incomplete" };

// One output item of the assistant, by type; `delta`/`done` receive the matching stream events.
function itemView(item) {
  if (item.type === "message") {
    const node = el("div", "item message");
    return { node, delta: (d) => node.append(d), done: (it) => {
      node.textContent = (it.content ?? []).map((p) => p.text ?? p.refusal ?? "").join("");
    } };
  }
  if (item.type === "reasoning") {
    const node = el("details", "item reasoning");
    const summary = el("summary", null, "Reasoning…");
    const text = el("div", "reasoning-text");
    node.append(summary, text);
    return { node, delta: (d) => text.append(d), done: () => { summary.textContent = "Reasoning"; } };
  }
  if (item.type === "code_interpreter_call") {
    const node = el("div", "item code-call");
    const badge = el("span", "badge");
    const code = el("code");
    const outputs = el("div", "outputs");
    const setBadge = (s) => { badge.dataset.status = s; badge.textContent = STATUS_LABEL[s] ?? s; };
    const head = el("div", "item-head");
    head.append(el("span", "label", "Python"), badge);
    const pre = el("pre", "code");
    pre.append(code);
    node.append(head, pre, outputs);
    setBadge(item.status ?? "in_progress");
    return { node, setBadge, delta: (d) => code.append(d), done: (it) => {
      code.textContent = it.code ?? code.textContent;
      setBadge(it.status);
      if (it.outputs === null) outputs.append(el("div", "note", "outputs not included (tick “Include outputs”)"));
      for (const out of it.outputs ?? []) {
        if (out.type === "logs" && out.logs) outputs.append(el("pre", "logs", out.logs));
        if (out.type === "image" && out.url?.startsWith("data:image/")) {
          const img = el("img", "figure");
          img.alt = "figure";
          img.src = out.url;
          outputs.append(img);
        }
      }
    } };
  }
  if (item.type === "function_call") {
    const node = el("div", "item function-call");
    const head = el("div", "item-head");
    head.append(el("span", "label", "Function call"), el("code", null, item.name));
    const args = el("pre", "args");
    node.append(head, args);
    return { node, delta: (d) => args.append(d), done: (it) => {
      args.textContent = it.arguments;
      node.append(el("div", "note", "The client runs function calls; this playground offers none."));
    } };
  }
  const node = el("div", "item note", `(${item.type})`);
  return { node, delta() {}, done() {} };
}

// One turn: the user's prompt, then the assistant's output items, a meta line and any error.
class Turn {
  constructor(prompt) {
    this.node = el("section", "turn");
    this.assistant = el("div", "assistant");
    this.meta = el("div", "meta");
    this.node.append(el("div", "user", prompt), this.assistant, this.meta);
    this.items = new Map();
  }

  error(message) {
    this.assistant.append(el("div", "error", message));
  }

  // Applies one event; returns the final response on a terminal event.
  handle(ev) {
    const view = this.items.get(ev.output_index);
    switch (ev.type) {
      case "response.created":
        this.meta.textContent = ev.response.id;
        break;
      case "response.output_item.added": {
        const v = itemView(ev.item);
        this.items.set(ev.output_index, v);
        this.assistant.append(v.node);
        break;
      }
      case "response.output_text.delta":
      case "response.reasoning_text.delta":
      case "response.reasoning_summary_text.delta":
      case "response.code_interpreter_call_code.delta":
      case "response.function_call_arguments.delta":
        view?.delta(ev.delta);
        break;
      case "response.code_interpreter_call.in_progress":
      case "response.code_interpreter_call.interpreting":
      case "response.code_interpreter_call.completed":
        view?.setBadge?.(ev.type.split(".").pop());
        break;
      case "response.output_item.done":
        view?.done(ev.item);
        break;
      case "response.completed":
      case "response.incomplete":
        if (ev.response.incomplete_details) {
          this.error(`Incomplete: ${ev.response.incomplete_details.reason}`);
        }
        this.meta.textContent = `${ev.response.id} · ${ev.response.status}`;
        return ev.response;
      case "response.failed":
        this.error(`Response failed: ${ev.response.error?.message ?? "unknown error"}`);
        this.meta.textContent = `${ev.response.id} · failed`;
        return ev.response;
      case "error":
        this.error(`Error: ${ev.message ?? ev.error?.message ?? JSON.stringify(ev)}`);
        return {};
    }
    return null;
  }
}

function showUsage(response) {
  const u = response.usage;
  if (!u) return setStatus(`Last response ${response.id}: ${response.status}`);
  const reasoning = u.output_tokens_details?.reasoning_tokens;
  setStatus(`Last response: ${u.input_tokens} input + ${u.output_tokens} output = ${u.total_tokens} tokens`
    + (reasoning ? ` (${reasoning} reasoning)` : ""));
}

function setBusy(busy) {
  ui.send.textContent = busy ? "Stop" : "Send";
  ui.send.classList.toggle("stop", busy);
  document.body.classList.toggle("busy", busy);
}

function scrollDown() {
  window.scrollTo(0, document.body.scrollHeight);
}

async function send(text) {
  const turn = new Turn(text);
  ui.log.append(turn.node);
  const body = { model: ui.model.value, input: text, stream: true };
  if (state.previousId) body.previous_response_id = state.previousId;
  if (ui.code.checked) body.tools = [{ type: "code_interpreter", container: { type: "auto" } }];
  if (ui.include.checked) body.include = ["code_interpreter_call.outputs"];
  if (ui.extra.value.trim()) {
    // Extra request fields (temperature, max_output_tokens, ...), merged over the ones above.
    try {
      Object.assign(body, JSON.parse(ui.extra.value));
    } catch (err) {
      return turn.error(`Extra request fields are not valid JSON: ${err.message}`);
    }
  }
  const controller = (state.controller = new AbortController());
  setBusy(true);
  scrollDown();
  try {
    const res = await fetch("/v1/responses", {
      method: "POST", headers: headers(), body: JSON.stringify(body), signal: controller.signal,
    });
    if (!res.ok) return turn.error(await httpError(res));
    let final = null;
    for await (const ev of sseEvents(res.body)) {
      final = turn.handle(ev) ?? final;
      scrollDown();
    }
    if (!final) return turn.error("The connection closed before the response finished (no terminal event).");
    if (final.id && final.status !== "failed") state.previousId = final.id;
    if (final.id) showUsage(final);
  } catch (err) {
    if (err.name === "AbortError") turn.error("Stopped.");
    else turn.error(`${err.name === "TypeError" ? "Connection error" : "Error"}: ${err.message}`);
  } finally {
    if (state.controller === controller) {
      state.controller = null;
      setBusy(false);
    }
    scrollDown();
  }
}

ui.form.addEventListener("submit", (e) => {
  e.preventDefault();
  if (state.controller) return state.controller.abort();
  const text = ui.prompt.value.trim();
  if (!text) return;
  ui.prompt.value = "";
  send(text);
});
ui.prompt.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    if (!state.controller) ui.form.requestSubmit();
  }
});
ui.newChat.addEventListener("click", () => {
  state.controller?.abort();
  state.previousId = null;
  ui.log.replaceChildren();
  setStatus("");
  ui.prompt.focus();
});
ui.key.value = localStorage.getItem(KEY_STORAGE) ?? "";
ui.key.addEventListener("change", () => {
  localStorage.setItem(KEY_STORAGE, ui.key.value.trim());
  loadModels();
});
loadModels();
