// The `openai` Node SDK, unchanged: a streamed code-interpreter turn through `client.responses.stream()`,
// a non-streamed one, and a second turn over `previous_response_id`.
// Usage: node openai_sdk.mjs <base_url>, with the plan on stdin:
//   {"model": ..., "streamed": [constraint, ...], "plain": [...], "second": [...]}
// where each list is the request's `structured_outputs` (the SDK passes unknown body fields through).
// Prints one JSON object: what the SDK handed back.
import OpenAI from "openai";
import { readFileSync } from "node:fs";

const baseURL = process.argv[2];
const plan = JSON.parse(readFileSync(0, "utf8"));
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 300_000 });
const tools = [{ type: "code_interpreter", container: { type: "auto" } }];
const include = ["code_interpreter_call.outputs"];

const stream = client.responses.stream({
  model: plan.model, input: "Compute it.", tools, include, structured_outputs: plan.streamed,
});
const types = [];
const codeDeltas = [];
for await (const event of stream) {
  types.push(event.type);
  if (event.type === "response.code_interpreter_call_code.delta") codeDeltas.push(event.delta);
}
const streamed = await stream.finalResponse();

const plain = await client.responses.create({
  model: plan.model, input: "Set z.", tools, include, structured_outputs: plan.plain,
});
const second = await client.responses.create({
  model: plan.model, input: "Use z.", tools, include, previous_response_id: plain.id, structured_outputs: plan.second,
});
const retrieved = await client.responses.retrieve(streamed.id);

console.log(JSON.stringify({
  node: process.version, types, codeDeltas, streamed, streamedText: streamed.output_text, retrieved,
  plain, plainText: plain.output_text, second, secondText: second.output_text,
}));
