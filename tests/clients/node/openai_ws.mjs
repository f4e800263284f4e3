// The `openai` Node SDK's WebSocket mode, unchanged (`ResponsesWS` over the npm `ws` package): a
// code-interpreter turn and a continuation over one socket with `store: false` (the second on a named
// lane), then an unknown `previous_response_id`, answered with an error event on an open socket.
// Usage: node openai_ws.mjs <base_url>, with the plan on stdin: {"model": ..., "first": [...], "second": [...]}
// (each list the request's `structured_outputs`). Prints one JSON object: every message the SDK handed back.
import OpenAI from "openai";
import { ResponsesWS } from "openai/resources/responses/ws";
import { readFileSync } from "node:fs";

const baseURL = process.argv[2];
const plan = JSON.parse(readFileSync(0, "utf8"));
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 300_000 });
const tools = [{ type: "code_interpreter", container: { type: "auto" } }];
const include = ["code_interpreter_call.outputs"];

const ws = new ResponsesWS(client);
const errors = [];
ws.on("error", (err) => errors.push(err.error ?? { message: String(err) }));
const messages = ws.stream()[Symbol.asyncIterator]();

// Server events until the response's terminal event (or an error event, which `stream()` also yields).
async function untilEnd() {
  const events = [];
  for (;;) {
    const { value, done } = await messages.next();
    if (done) throw new Error("the socket closed mid-response");
    if (value.type === "error") return events;
    if (value.type !== "message") continue;
    events.push(value.message);
    if (["response.completed", "response.failed", "response.incomplete", "error"].includes(value.message.type)) {
      return events;
    }
  }
}

ws.send({
  type: "response.create", model: plan.model, input: "Set z and print it.", tools, include, store: false,
  structured_outputs: plan.first,
});
const first = await untilEnd();
const firstId = first.at(-1).response.id;
ws.send({
  type: "response.create", model: plan.model, input: "Use z.", tools, include, store: false,
  previous_response_id: firstId, stream_id: "lane-1", structured_outputs: plan.second,
});
const second = await untilEnd();
ws.send({ type: "response.create", model: plan.model, input: "x", previous_response_id: "resp_unknown" });
const missing = await untilEnd();
ws.close({ code: 1000, reason: "done" });

console.log(JSON.stringify({ first, second, missing, errors }));
