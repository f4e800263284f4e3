// The Vercel AI SDK (`ai` + `@ai-sdk/openai`), unchanged: `streamText` with the provider's code-interpreter tool
// on its defaults (it sends container {"type": "auto"} and adds the include itself), then a second turn that
// sends the first turn's messages back.
// Usage: node ai_sdk.mjs <base_url>, with the plan on stdin: {"model": ..., "turns": [constraints, constraints]}.
// The SDK has no way to add a body field, so this script's own `fetch` adds the turn's `structured_outputs`
// (the vendor extension that forces the model's output) to each request, and records the body the SDK built.
// Prints one JSON object: the requests as the SDK built them and what it reported from each stream.
import { createOpenAI } from "@ai-sdk/openai";
import { streamText } from "ai";
import { readFileSync } from "node:fs";

const baseURL = process.argv[2];
const plan = JSON.parse(readFileSync(0, "utf8"));
const sent = [];
let force = null;

async function forcingFetch(url, init) {
  const body = JSON.parse(init.body);
  sent.push(body);
  return fetch(url, { ...init, body: JSON.stringify({ ...body, structured_outputs: force }) });
}

const openai = createOpenAI({ baseURL, apiKey: "unused", fetch: forcingFetch });
const tools = { code_interpreter: openai.tools.codeInterpreter() };

async function turn(messages, constraints) {
  force = constraints;
  const result = streamText({ model: openai.responses(plan.model), tools, messages, maxRetries: 0 });
  const parts = [];
  for await (const part of result.fullStream) {
    if (part.type === "error") throw part.error;
    parts.push(part);
  }
  return {
    partTypes: parts.map((p) => p.type),
    toolCalls: parts.filter((p) => p.type === "tool-call"),
    toolResults: parts.filter((p) => p.type === "tool-result"),
    text: await result.text,
    finishReason: await result.finishReason,
    usage: await result.usage,
    messages: (await result.response).messages,
  };
}

const question = [{ role: "user", content: "Compute it." }];
const first = await turn(question, plan.turns[0]);
const second = await turn([...question, ...first.messages, { role: "user", content: "And again." }], plan.turns[1]);
console.log(JSON.stringify({ node: process.version, sent, first, second }));
