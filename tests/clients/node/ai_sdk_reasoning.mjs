// The Vercel AI SDK (`ai` + `@ai-sdk/openai`), unchanged, on a reasoning model: `streamText` over two turns, each
// with its own `providerOptions.openai` (`reasoningSummary`, `textVerbosity`, `store`, `forceReasoning`); the
// second turn sends the first turn's messages back (its reasoning among them) as the SDK does.
// Usage: node ai_sdk_reasoning.mjs <base_url>, with the plan on stdin: {"model": ..., "turns": [options, options]}.
// The server forces the model's outputs; this script's own `fetch` (a documented provider option) only records
// the body the SDK built. Prints one JSON object: the requests as the SDK built them and what it reported.
import { createOpenAI } from "@ai-sdk/openai";
import { streamText } from "ai";
import { readFileSync } from "node:fs";

const baseURL = process.argv[2];
const plan = JSON.parse(readFileSync(0, "utf8"));
const sent = [];

async function recordingFetch(url, init) {
  sent.push(JSON.parse(init.body));
  return fetch(url, init);
}

const openai = createOpenAI({ baseURL, apiKey: "unused", fetch: recordingFetch });

async function turn(messages, options) {
  const result = streamText({
    model: openai.responses(plan.model),
    messages,
    providerOptions: { openai: options },
    maxRetries: 0,
  });
  const parts = [];
  for await (const part of result.fullStream) {
    if (part.type === "error") throw part.error;
    parts.push(part);
  }
  return {
    partTypes: parts.map((p) => p.type),
    reasoningDeltas: parts.filter((p) => p.type === "reasoning-delta").map((p) => p.text),
    reasoningText: await result.reasoningText,
    text: await result.text,
    finishReason: await result.finishReason,
    warnings: await result.warnings,
    messages: (await result.response).messages,
  };
}

const question = [{ role: "user", content: "Weather in Paris?" }];
const first = await turn(question, plan.turns[0]);
const again = [...question, ...first.messages, { role: "user", content: "And tomorrow?" }];
const second = await turn(again, plan.turns[1]);
console.log(JSON.stringify({ node: process.version, sent, first, second }));
