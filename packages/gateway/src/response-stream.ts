import type { ServerResponse } from 'node:http';
import { messageId, outputItems, type ResponseParts, responseObject } from './responses.js';

// The Responses API's streaming events, written as the reply is sampled: response.created and
// response.in_progress when the stream opens; the message item, its content part and one
// response.output_text.delta per piece of text as it comes; when the reply is done, the text's
// .done events, each function call as one item with its arguments in one delta (parsed from
// the whole reply), and response.completed (or .incomplete). Every event has its
// sequence_number, in the order the API sends them.

export class ResponseStream {
  readonly #res: ServerResponse;
  /** The response as known before sampling: id, model, the request's settings. */
  readonly #head: ResponseParts;
  readonly #headers: Record<string, string>;
  #sequence = 0;
  #opened = false;
  /** The message item has been announced (text has streamed). */
  #message = false;
  #text = '';

  constructor(
    res: ServerResponse,
    head: Omit<ResponseParts, 'content' | 'toolCalls' | 'finishReason' | 'usage'>,
    headers: Record<string, string>,
  ) {
    this.#res = res;
    this.#head = {
      ...head,
      content: null,
      toolCalls: [],
      finishReason: 'stop',
      usage: { input: 0, output: 0 },
    };
    this.#headers = headers;
  }

  #send(event: { type: string } & Record<string, unknown>): void {
    const e = { ...event, sequence_number: this.#sequence++ };
    this.#res.write(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
  }

  /** Opens the stream (at the first token, so an early refusal keeps its HTTP status). */
  open(): void {
    if (this.#opened) return;
    this.#opened = true;
    this.#res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      ...this.#headers,
    });
    const response = responseObject(this.#head, 'in_progress');
    this.#send({ type: 'response.created', response });
    this.#send({ type: 'response.in_progress', response });
  }

  #ids() {
    return { item_id: messageId(this.#head.id), output_index: 0, content_index: 0 };
  }

  /** Text of the reply's message, as it comes. */
  delta(text: string): void {
    this.open();
    if (text === '') return;
    if (!this.#message) this.#announceMessage();
    this.#text += text;
    this.#send({ type: 'response.output_text.delta', ...this.#ids(), delta: text });
  }

  /** The finished reply: the text's end, the function calls, the final response; ends the stream. */
  finish(p: ResponseParts, rest: string): void {
    const status = p.finishReason === 'length' ? 'incomplete' : 'completed';
    this.open();
    const items = outputItems(p);
    // Text that streamed is a message item; so is an empty reply that made no call.
    if (items[0]?.type === 'message' && !this.#message) this.#announceMessage();
    this.delta(rest);
    items.forEach((item, output_index) => {
      if (item.type === 'message') {
        const ids = this.#ids();
        const part = { type: 'output_text', text: this.#text, annotations: [] };
        this.#send({ type: 'response.output_text.done', ...ids, text: this.#text });
        this.#send({ type: 'response.content_part.done', ...ids, part });
        this.#send({ type: 'response.output_item.done', output_index, item });
        return;
      }
      this.#send({
        type: 'response.output_item.added',
        output_index,
        item: { ...item, arguments: '', status: 'in_progress' },
      });
      this.#send({
        type: 'response.function_call_arguments.delta',
        item_id: item.id,
        output_index,
        delta: item.arguments,
      });
      this.#send({
        type: 'response.function_call_arguments.done',
        item_id: item.id,
        output_index,
        arguments: item.arguments,
      });
      this.#send({ type: 'response.output_item.done', output_index, item });
    });
    this.#send({
      type: status === 'completed' ? 'response.completed' : 'response.incomplete',
      response: responseObject(p, status),
    });
    this.#res.end();
  }

  /** The message item and its text part, opened (their text follows in deltas). */
  #announceMessage(): void {
    this.#message = true;
    const item = {
      type: 'message',
      id: messageId(this.#head.id),
      status: 'in_progress',
      role: 'assistant',
      content: [],
    };
    this.#send({ type: 'response.output_item.added', output_index: 0, item });
    this.#send({
      type: 'response.content_part.added',
      ...this.#ids(),
      part: { type: 'output_text', text: '', annotations: [] },
    });
  }
}
