import type { Trajectory } from '@flowgrpo/core';
import { displayAnswer } from './final-answer.js';
import { stopReasonTitle } from './stop-reasons.js';
import type { TokenPieces } from './token-pieces.js';

// One trajectory as HTML, turn by turn and token by token: every token a <span class="tok">
// carrying data-id, data-logprob (the sampler's, empty where none was recorded: prompts, tool
// outputs), data-trainable (1/0) and data-advantage (the advantage its loss was weighted by; 0
// for tokens that carry no loss). Non-trainable spans (prompts, tool outputs) sit in
// .masked blocks; tool calls and their results are shown inline where they happened. The same
// HTML is served by `flowgrpo view` and embedded in report.html; static/tokens.js colours it.

const ESC: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ESC[c]!);

const fmt = (x: number | undefined) =>
  x === undefined || !Number.isFinite(x) ? '' : String(Number(x.toPrecision(6)));

/** The error a failed rollout recorded (metadata.errors / rolloutError), if any. */
export function trajectoryError(t: Trajectory): { code: string; message: string } | undefined {
  const m = t.metadata as
    | {
        errors?: { code?: string; message?: string }[];
        rolloutError?: { name?: string; message?: string };
      }
    | undefined;
  const e = m?.errors?.[0];
  if (e) return { code: String(e.code ?? 'ERROR'), message: String(e.message ?? '') };
  if (m?.rolloutError)
    return {
      code: String(m.rolloutError.name ?? 'ERROR'),
      message: String(m.rolloutError.message),
    };
  if (t.stopReason === 'error')
    return { code: 'ERROR', message: 'the rollout stopped on an error' };
  return undefined;
}

/**
 * The roles a trajectory's tokens play: `planner` (a Flow rollout's policy turns) or the segment
 * kinds (`prompt`, `action`, `observation`), `tool` when a tool was called, and the roles named
 * by a multi-role rollout's errors and per-role rewards.
 */
export function trajectoryRoles(t: Trajectory): string[] {
  const roles = new Set<string>();
  if (t.turns?.length) roles.add('planner');
  for (const s of t.segments ?? []) roles.add(s.kind);
  if (t.turns?.some((u) => u.toolName)) roles.add('tool');
  const m = t.metadata as
    | { errors?: { role?: string }[]; roleRewards?: Record<string, unknown> }
    | undefined;
  for (const e of m?.errors ?? []) if (e.role) roles.add(String(e.role));
  for (const r of Object.keys(m?.roleRewards ?? {})) roles.add(r);
  return [...roles];
}

function tokens(
  ids: ArrayLike<number>,
  o: { pieces: TokenPieces; logprobs?: ArrayLike<number>; trainable: boolean; advantage: number },
): string {
  let html = '';
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    const lp = o.logprobs ? fmt(o.logprobs[i]) : '';
    html +=
      `<span class="tok" data-id="${id}" data-logprob="${lp}" data-trainable="${o.trainable ? 1 : 0}"` +
      ` data-advantage="${o.trainable ? fmt(o.advantage) : 0}">${escapeHtml(o.pieces(id))}</span>`;
  }
  return html;
}

function maskedBlock(label: string, inner: string, open = false): string {
  return `<details class="masked"${open ? ' open' : ''}><summary>${escapeHtml(label)}</summary><div class="toks">${inner}</div></details>`;
}

/** The trajectory's header line: reward, advantage, stop reason (explained on hover), error. */
function header(t: Trajectory, index: number): string {
  const err = trajectoryError(t);
  const bits = [
    `<b>#${index}</b>`,
    `reward <b class="reward">${fmt(t.reward) || '–'}</b>`,
    `advantage <b>${fmt(t.advantage) || '–'}</b>`,
    `stop <b class="stop" data-stop="${escapeHtml(t.stopReason)}" title="${escapeHtml(stopReasonTitle(t.stopReason))}">${escapeHtml(t.stopReason)}</b>`,
  ];
  if (err)
    bits.push(`<span class="error">${escapeHtml(err.code)}: ${escapeHtml(err.message)}</span>`);
  return `<header>${bits.join(' · ')}</header>`;
}

/** The final answer (tag fragments taken out: final-answer.ts), ground truth, metadata folded. */
function footer(t: Trajectory): string {
  const parts: string[] = [];
  const { answer, recorded } = displayAnswer(t.finalAnswer);
  parts.push(
    `<div class="answer">final answer: <code class="final">${answer ? escapeHtml(answer) : '<i>none</i>'}</code>` +
      (recorded === undefined
        ? ''
        : ` <small class="recorded">as recorded, with tag fragments: <code>${escapeHtml(recorded)}</code></small>`) +
      '</div>',
  );
  if (t.groundTruth !== undefined)
    parts.push(`<div class="answer">ground truth: <code>${escapeHtml(t.groundTruth)}</code></div>`);
  if (t.metadata && Object.keys(t.metadata).length > 0)
    parts.push(
      `<details class="meta"><summary>reward details and metadata</summary><pre>${escapeHtml(JSON.stringify(t.metadata, null, 2))}</pre></details>`,
    );
  return parts.join('');
}

/** One trajectory as HTML (see the top of this file); `index` is its row in the step's batch. */
export function trajectoryHtml(t: Trajectory, index: number, pieces: TokenPieces): string {
  const adv = t.advantage ?? 0;
  const body: string[] = [];
  if (t.question !== undefined) body.push(`<div class="question">${escapeHtml(t.question)}</div>`);
  for (const u of t.turns ?? []) {
    const a = u.advantage ?? adv;
    let turn = maskedBlock(
      `turn ${u.index} prompt · ${u.promptTokens.length} tokens, not trained`,
      tokens(u.promptTokens, { pieces, trainable: false, advantage: 0 }),
    );
    turn += `<div class="action toks" data-role="planner">${tokens(u.actionTokens, {
      pieces,
      logprobs: u.actionLogprobs,
      trainable: true,
      advantage: a,
    })}</div>`;
    if (u.toolName !== undefined) {
      const input = u.toolInput === undefined ? '' : JSON.stringify(u.toolInput);
      turn += `<div class="toolcall">tool call <b>${escapeHtml(u.toolName)}</b>(<code>${escapeHtml(input)}</code>)</div>`;
      if (u.toolResult !== undefined)
        turn += `<div class="masked toolresult" data-role="tool">→ ${escapeHtml(u.toolResult)}</div>`;
    }
    if (!u.parsed) turn += '<div class="error">this action could not be parsed</div>';
    body.push(`<section class="turn" data-turn="${u.index}">${turn}</section>`);
  }
  for (const [i, s] of (t.segments ?? []).entries()) {
    const inner = tokens(s.tokens, {
      pieces,
      ...(s.logprobs && { logprobs: s.logprobs }),
      trainable: s.trainable,
      advantage: adv,
    });
    body.push(
      s.trainable
        ? `<section class="turn" data-turn="${i}"><div class="action toks" data-role="${s.kind}">${inner}</div></section>`
        : `<section class="turn" data-turn="${i}" data-role="${s.kind}">${maskedBlock(`${s.kind} · ${s.tokens.length} tokens, not trained`, inner, s.kind === 'observation')}</section>`,
    );
  }
  return (
    `<article class="traj" data-index="${index}" data-group="${escapeHtml(t.groupId)}"` +
    ` data-reward="${fmt(t.reward)}" data-advantage="${fmt(t.advantage)}">` +
    `${header(t, index)}${body.join('')}${footer(t)}</article>`
  );
}
