// '@flowgrpo/trainer/demo': the embedded demo's task (`flowgrpo demo`) — the almanac, its
// questions, agent, roles, reward, teachers and presets. Kept out of the trainer's main entry
// point: a library user training their own task never sees it; the CLI (whose src/demo/ holds the
// demo's pipelines), the examples and the tests import it here.
export {
  type Almanac,
  type AlmanacHalf,
  type AlmanacOptions,
  createAlmanac,
  type Landmark,
  lookupAlmanac,
} from './almanac.js';
export { DEMO_TASK_NAMES, DEMO_TASKS, type DemoTaskName, type DemoTaskPreset } from './presets.js';
export {
  almanacTool,
  type DemoAgentOptions,
  demoAgent,
  demoPlannerPrompt,
  demoReward,
  demoTools,
  demoTrainingReward,
  executorEngine,
  field,
  generatorEngine,
  jsonAfter,
  plannerFormatReward,
  RuleEngine,
  verifierEngine,
} from './roles.js';
export {
  type DemoQuestion,
  type KindWeights,
  makeQuestions,
  QUESTION_KINDS,
  questionRows,
  SUB_GOALS,
} from './task.js';
export { type TeacherOptions, TeacherPolicy } from './teacher.js';
export { TwoRoleTeacher, type TwoRoleTeacherOptions } from './two-role-teacher.js';
export {
  demoVerifierPrompt,
  PolicyVerifierEngine,
  type PolicyVerifierOptions,
  parseVerifierReply,
  verifierReply,
} from './verifier-role.js';
