// Drives the AI SDK's own chat transports against a tokenwire server and prints what they assembled, as JSON.
//
// node tests/support/chat_client.mjs MODULES JOB: MODULES is the node_modules folder holding ai@6 and @workflow/ai@6; JOB is
// JSON: {transport: "default" | "workflow", api, chatId, body, abortAfter, reconnect, rewrite, stopAfter,
// stopUrl, only}.  The messages go through the transport's sendMessages (or, with only: "reconnect", straight
// to reconnectToStream), every chunk through the SDK's readUIMessageStream; abortAfter aborts the request after
// that many text-delta chunks, and reconnect: true then calls reconnectToStream.  rewrite: [from, to] sends
// every GET to another server (a second instance); hosts lists the origin each request went to.  stopAfter POSTs
// stopUrl ({runId}: the stream id the POST answered with) after that many deltas and times
// how long until the reader's finish.  Every request is recorded: [method, url, status].
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, jobText] = process.argv.slice(2);
const job = JSON.parse(jobText);
const ai = await import(pathToFileURL(path.join(modules, 'ai', 'dist', 'index.mjs')).href);
const workflow = await import(pathToFileURL(path.join(modules, '@workflow', 'ai', 'dist', 'index.js')).href);

const seen = { requests: [], hosts: [], chunks: [], errors: [], texts: [], textParts: [], stopMs: null, reconnected: null };

async function recordingFetch(url, init = {}) {
  const method = init.method ?? 'GET';
  let target = String(url);
  if (job.rewrite && method === 'GET') target = target.replace(job.rewrite[0], job.rewrite[1]);
  const response = await fetch(target, init);
  seen.requests.push([method, target.replace(/^https?:\/\/[^/]+/, ''), response.status]);
  seen.hosts.push(new URL(target).origin);
  if (method === 'POST') seen.runId = response.headers.get('x-workflow-run-id');
  return response;
}

const transport = job.transport === 'workflow'
  ? new workflow.WorkflowChatTransport({ api: job.api, fetch: recordingFetch, maxConsecutiveErrors: 3 })
  : new ai.DefaultChatTransport({ api: job.api, fetch: recordingFetch, body: job.body ?? {} });

// Reads one chunk stream through readUIMessageStream; abort/stop hooks fire after n text deltas.
async function read(stream, controller) {
  let deltas = 0;
  let stoppedAt = null;
  const tapped = stream.pipeThrough(new TransformStream({
    async transform(chunk, out) {
      seen.chunks.push(chunk.type);
      if (chunk.type === 'finish' && stoppedAt !== null) seen.stopMs = Date.now() - stoppedAt;
      out.enqueue(chunk);
      if (chunk.type !== 'text-delta') return;
      deltas += 1;
      if (controller && deltas === job.abortAfter) controller.abort();
      if (deltas === job.stopAfter) {
        stoppedAt = Date.now();
        const url = job.stopUrl.replace('{runId}', seen.runId);
        const answer = await fetch(url, { method: 'POST' });
        seen.requests.push(['POST', url.replace(/^https?:\/\/[^/]+/, ''), answer.status]);
      }
    },
  }));
  let last = null;
  try {
    for await (const message of ai.readUIMessageStream({ stream: tapped, onError: (e) => seen.errors.push(e.message) })) {
      last = message;
    }
  } catch (error) {
    if (error.name !== 'AbortError') seen.errors.push(`${error.name}: ${error.message}`);
  }
  const parts = last ? last.parts.filter((part) => part.type === 'text') : [];
  seen.textParts.push(parts.length);
  seen.texts.push(parts.map((part) => part.text).join(''));
  seen.messageId = last ? last.id : null;
}

const messages = [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Say something.' }] }];
try {
  if (job.only !== 'reconnect') {
    const controller = new AbortController();
    const stream = await transport.sendMessages({
      chatId: job.chatId, messages, trigger: 'submit-message', messageId: undefined,
      abortSignal: controller.signal, body: job.body ?? {},
    });
    await read(stream, job.abortAfter ? controller : null);
  }
  if (job.reconnect || job.only === 'reconnect') {
    const stream = await transport.reconnectToStream({ chatId: job.chatId });
    seen.reconnected = stream !== null;
    if (stream !== null) await read(stream, null);
  }
} catch (error) {
  seen.errors.push(`${error.name}: ${error.message}`);
}
console.log(JSON.stringify(seen));
