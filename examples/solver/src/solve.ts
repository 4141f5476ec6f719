// The seeds' multi-agent solver run (AgentFlow: analyze → plan → execute a tool → verify … →
// answer) on the seeds' query, with the step trace printed as it happens.
//
// Engines: every fixed role (analyzer, executor, verifier, generator, and the Wikipedia tool's
// page selection) on an OpenAI-compatible endpoint. The planner runs there too — or, with
// `local`, on a local model through the trainer's ONNX decoder (the policy Flow-GRPO trains),
// inside FlowRollout, the same loop the trainer records.
import { join } from 'node:path';
import {
  FlowRollout,
  FlowSolver,
  OpenAIEngine,
  type PolicyEngine,
  type SolverEvent,
} from '@flowgrpo/agent';
import type { LLMEngine, StopReason, Trajectory } from '@flowgrpo/core';
import {
  createTinyQwen2,
  DecoderArtifacts,
  type DeviceRequest,
  LocalPolicyEngine,
  loadDecoderModel,
  loadLoraAdapter,
  loadTokenizer,
  readArtifactsManifest,
  type Tokenizer,
} from '@flowgrpo/models';
import {
  createCalculatorTool,
  createGeneralistTool,
  createPythonTool,
  createWikipediaTool,
  LocalCorpus,
  loadFlashRagPassages,
  loadHotpotQaPassages,
  MediaWikiClient,
  type Passage,
  type Tool,
  type WikipediaBackend,
} from '@flowgrpo/tools';
import { buildTrainingArtifacts } from '@flowgrpo/trainer';

export const SEED_QUERY =
  'Calculate 12 squared, and then use Wikipedia to find out what major historical event happened in that year (AD).';

export interface SolverExampleOptions {
  question?: string;
  baseURL: string;
  model: string;
  apiKey?: string;
  /** 'offline' (default): BM25 over local passages; 'live': the MediaWiki API. */
  wiki?: 'offline' | 'live';
  /** Offline corpus: passages (HotpotQA contexts or FlashRAG jsonl). */
  passages?: readonly Passage[];
  /** Tools by short name (default calculator, python, wikipedia, generalist). */
  tools?: readonly string[];
  maxSteps?: number;
  /**
   * The planner on a local model: an HF folder, an artifacts folder (artifacts.json), or 'tiny'
   * (a tiny Qwen2 created from a seed: untrained, it shows the plumbing, not good plans).
   */
  local?: string;
  /** A PEFT adapter for the local planner (e.g. a Flow-GRPO checkpoint). */
  adapter?: string;
  /** Where a local model's artifacts are built. */
  workDir?: string;
  device?: DeviceRequest;
  /** Tokens per planner reply of a local planner (default 256). */
  plannerTokens?: number;
  log?: (text: string) => void;
}

export interface SolverExampleResult {
  finalAnswer: string;
  answerText: string;
  stopReason: StopReason;
  steps: number;
  events: SolverEvent[];
  trajectory?: Trajectory;
}

function excerpt(value: unknown, max = 300): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const line = (text ?? '').replace(/\s+/g, ' ').trim();
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`;
}

/** The step trace: analysis, plans, tool commands, results, verifier decisions, the answer. */
export function traceLines(e: SolverEvent): string[] {
  switch (e.type) {
    case 'start':
      return [`Query: ${e.question}`, `Tools: ${e.tools.join(', ')} (at most ${e.maxSteps} steps)`];
    case 'analysis':
      return [
        '',
        '==> Step 0: query analysis',
        `  summary: ${excerpt(e.analysis.concise_summary)}`,
        `  skills: ${excerpt(e.analysis.required_skills)}`,
        `  relevant tools: ${excerpt(e.analysis.relevant_tools)}`,
      ];
    case 'plan':
      return [
        '',
        `==> Step ${e.step}: plan`,
        `  sub-goal: ${excerpt(e.nextStep.sub_goal)}`,
        `  tool: ${e.nextStep.tool_name}`,
        `  why: ${excerpt(e.nextStep.justification, 200)}`,
      ];
    case 'command':
      return [`  command: ${e.toolName}(${excerpt(e.command.arguments)})`];
    case 'tool_result':
      return [
        `  result${e.result.ok ? '' : ' (failed)'} in ${(e.durationMs / 1000).toFixed(2)} s: ${excerpt(e.result.ok ? e.result.output : e.result.error)}`,
      ];
    case 'verification':
      return [
        `  verifier: ${e.verification.stop_signal ? 'STOP — enough to answer' : 'CONTINUE'} (${excerpt(e.verification.analysis, 200)})`,
      ];
    case 'turn':
      return [
        `  planner turn on the local model: ${e.turn.actionTokens.length} tokens, ${e.turn.parsed === false ? 'not a NextStep JSON (read as "Final Answer")' : 'parsed'}`,
      ];
    case 'error':
      return [
        `  error in ${e.error.role}${e.error.step ? ` (step ${e.error.step})` : ''}: ${excerpt(e.error.message, 200)}`,
      ];
    case 'answer':
      return ['', '==> Final answer', e.answerText.trim(), '', `Answer: ${e.finalAnswer}`];
    case 'end':
      return [`(stop: ${e.stopReason}, ${(e.durationMs / 1000).toFixed(1)} s)`];
  }
}

function buildTools(
  names: readonly string[],
  engine: LLMEngine,
  backend: WikipediaBackend,
): Tool[] {
  return names.map((name): Tool => {
    switch (name) {
      case 'calculator':
        return createCalculatorTool() as Tool;
      case 'python':
        return createPythonTool() as Tool;
      case 'wikipedia':
        return createWikipediaTool({ backend, engine }) as Tool;
      case 'generalist':
        return createGeneralistTool({ engine }) as Tool;
      default:
        throw new Error(`unknown tool '${name}' (calculator, python, wikipedia, generalist)`);
    }
  });
}

/** The local planner: a PolicyEngine over the trainer's ONNX decoder. */
async function localPlanner(
  o: SolverExampleOptions,
): Promise<{ engine: PolicyEngine; release: () => Promise<void>; describe: string }> {
  const spec = o.local!;
  const work = o.workDir ?? join('out', 'solver');
  let dir: string;
  let tokenizer: Tokenizer;
  let describe: string;
  let isArtifacts = false;
  try {
    readArtifactsManifest(spec);
    isArtifacts = true;
  } catch {}
  if (spec === 'tiny') {
    const tiny = await createTinyQwen2(join(work, 'tiny-planner'), {
      seed: 1,
      hiddenSize: 64,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      ropeTheta: 10_000,
      maxPositionEmbeddings: 8192,
    });
    if (o.adapter) throw new Error('--adapter needs --local <HF folder or artifacts>, not tiny');
    dir = join(work, 'tiny-planner-artifacts');
    buildTrainingArtifacts(tiny.weights, dir, { graphs: ['decode'], maxPositions: 8192 });
    tokenizer = tiny.tokenizer;
    describe = 'a tiny untrained Qwen2 (byte-level tokenizer): expect unparseable plans';
  } else if (isArtifacts) {
    dir = spec;
    tokenizer = await loadTokenizer(spec);
    describe = `artifacts ${spec}`;
  } else {
    const weights = await loadDecoderModel(spec, { dtype: 'F32' });
    tokenizer = await loadTokenizer(spec);
    dir = join(work, 'planner-artifacts');
    // The decode graph takes the adapter's LoRA matrices as inputs when there is one.
    const adapterLora = o.adapter
      ? (await loadLoraAdapter(o.adapter, weights.config)).lora
      : undefined;
    buildTrainingArtifacts(weights, dir, {
      graphs: ['decode'],
      maxPositions: 8192,
      ...(adapterLora && { lora: adapterLora }),
    });
    describe = `${spec} (decode graph built into ${dir})`;
  }
  const artifacts = await DecoderArtifacts.open(dir, {
    graphs: ['decode'],
    device: o.device ?? 'cpu',
  });
  const engine = new LocalPolicyEngine({ artifacts, tokenizer, model: 'planner' });
  if (o.adapter) await engine.updateAdapter({ name: 'planner', path: o.adapter });
  return { engine, release: () => artifacts.release(), describe };
}

export async function runSolverExample(o: SolverExampleOptions): Promise<SolverExampleResult> {
  const log = o.log ?? console.log;
  const question = o.question ?? SEED_QUERY;
  const engine = new OpenAIEngine({
    baseURL: o.baseURL,
    model: o.model,
    ...(o.apiKey && { apiKey: o.apiKey }),
    timeoutMs: 120_000,
    defaults: { temperature: 0 },
  });
  const backend: WikipediaBackend =
    o.wiki === 'live'
      ? new MediaWikiClient()
      : new LocalCorpus(o.passages ?? [], { name: 'offline-wikipedia' });
  log(
    `Engines: ${o.model} at ${o.baseURL}; Wikipedia: ${o.wiki === 'live' ? 'live MediaWiki API' : `offline BM25 over ${o.passages?.length ?? 0} passages`}`,
  );
  const tools = buildTools(
    o.tools ?? ['calculator', 'python', 'wikipedia', 'generalist'],
    engine,
    backend,
  );
  const events: SolverEvent[] = [];
  const onEvent = (e: SolverEvent) => {
    events.push(e);
    for (const line of traceLines(e)) log(line);
  };

  if (!o.local) {
    const solver = new FlowSolver({
      engine,
      tools,
      maxSteps: o.maxSteps ?? 5,
      onEvent,
      workspace: true,
    });
    const r = await solver.solve(question);
    log(
      `Tokens: ${r.usage.total.totalTokens} (${Object.entries(r.usage.byRole)
        .map(([role, u]) => `${role} ${u.totalTokens}`)
        .join(', ')})`,
    );
    return {
      finalAnswer: r.finalAnswer,
      answerText: r.answerText,
      stopReason: r.stopReason,
      steps: r.steps.length,
      events,
    };
  }

  const planner = await localPlanner(o);
  log(`Planner: local model — ${planner.describe}`);
  try {
    const rollout = new FlowRollout({
      policy: planner.engine,
      engine,
      tools,
      maxTurns: o.maxSteps ?? 5,
      analyzeQuery: true,
      sampling: { maxTokens: o.plannerTokens ?? 256, temperature: 0.7, topP: 0.9 },
      onEvent,
      workspace: true,
    });
    const t = await rollout.run(question, { seed: 1 });
    return {
      finalAnswer: t.finalAnswer,
      answerText: String(t.metadata?.answerText ?? t.finalAnswer),
      stopReason: t.stopReason,
      steps: t.turns?.length ?? 0,
      events,
      trajectory: t,
    };
  } finally {
    await planner.release();
  }
}

/** The offline Wikipedia: HotpotQA (distractor) rows' paragraphs, or a FlashRAG/DPR jsonl corpus. */
export async function loadPassages(
  file: string,
  format: 'hotpotqa' | 'flashrag',
): Promise<Passage[]> {
  return format === 'hotpotqa' ? loadHotpotQaPassages(file) : loadFlashRagPassages(file);
}
