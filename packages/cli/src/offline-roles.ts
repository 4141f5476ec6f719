import type { SolverEngines } from '@flowgrpo/agent';
import type { Tool } from '@flowgrpo/tools';
import { field, generatorEngine, RuleEngine, verifierEngine } from '@flowgrpo/trainer/demo';

// The Flow agent's fixed roles when the run config names no server for them (agent.engine
// absent): the demo's rule-based engines, which read the prompts an LLM would read and answer in
// the schemas an LLM must answer in, so the run takes the code path of one with a served model.
// Only the planner is a model, the one being trained:
//
//   executor   grounds the planner's sub-goal into the tool's input: a sub-goal that names an
//              operation ("add the numbers", "subtract", "multiply", "divide") applies it to the
//              question's numbers in their order (the calculator's expression); any other
//              sub-goal goes to the tool verbatim, as its first input
//   verifier   never stops the run: the planner decides when it has the answer
//   generator  answers with the result of the last successful tool call
//
// A stand-in, as the demo's: the planner decides what to do, the executor how — AgentFlow's
// division of labour, which spares a small planner copying numbers out of the question.

const OPERATIONS: readonly (readonly [RegExp, string])[] = [
  [/\badd\b|\bsum\b|\bplus\b/, '+'],
  [/\bsubtract\b|\bdifference\b|\bminus\b/, '-'],
  [/\bmultiply\b|\bproduct\b|\btimes\b/, '*'],
  [/\bdivide\b|\bquotient\b/, '/'],
];

/** The calculator expression a sub-goal naming an operation stands for, from the question. */
export function operationExpression(subGoal: string, question: string): string | undefined {
  const goal = subGoal.toLowerCase();
  const op = OPERATIONS.find(([pattern]) => pattern.test(goal))?.[1];
  const numbers = question.match(/\d+(?:\.\d+)?/g) ?? [];
  if (op === undefined || numbers.length < 2) return undefined;
  return numbers.join(op);
}

/** The rule-based executor: the tool's input from the sub-goal (see above). */
export function offlineExecutor(tools: readonly Tool[]): RuleEngine {
  return new RuleEngine({
    model: 'rules/executor',
    object(user) {
      const subGoal = (field(user, 'Sub-goal') ?? '').trim();
      const name = (field(user, 'Tool') ?? '').trim();
      const tool = tools.find((t) => t.name === name);
      const input = Object.keys(tool?.metadata.inputTypes ?? {})[0] ?? 'query';
      const value =
        (name === 'calculator' && operationExpression(subGoal, field(user, 'Question') ?? '')) ||
        subGoal;
      return {
        analysis: 'The sub-goal and the question give the tool input.',
        explanation: `${name} with "${value}"`,
        arguments: { [input]: value },
      };
    },
  });
}

/** Executor, verifier and generator for a Flow agent run offline (agent.engine absent). */
export function offlineRoles(tools: readonly Tool[]): Omit<SolverEngines, 'planner'> {
  return {
    executor: offlineExecutor(tools),
    verifier: verifierEngine(),
    generator: generatorEngine(),
  };
}
