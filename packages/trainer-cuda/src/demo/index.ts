// '@flowgrpo/trainer/demo': the embedded demo (`flowgrpo demo`) — the almanac task, its agent,
// reward, teacher and pipeline. Kept out of the trainer's main entry point: a library user
// training their own task never sees it; the CLI, the examples and the tests import it here.
export {
  type Almanac,
  type AlmanacHalf,
  type AlmanacOptions,
  createAlmanac,
  type Landmark,
  lookupAlmanac,
} from './almanac.js';
export {
  type DemoBudget,
  type DemoOptions,
  type DemoResult,
  demoSettings,
  demoTaskSetup,
  runDemo,
} from './pipeline.js';
export { DEMO_TASK_NAMES, DEMO_TASKS, type DemoTaskName, type DemoTaskPreset } from './presets.js';
export {
  almanacTool,
  type DemoAgentOptions,
  demoAgent,
  demoPlannerPrompt,
  demoReward,
  demoTools,
  demoTrainingReward,
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
  kindTable,
  runTwoRoleDemo,
  TWO_ROLE_RUNS,
  type TwoRoleDemoOptions,
  type TwoRoleDemoResult,
  type TwoRoleRun,
  twoRoleAgent,
  twoRoleProgram,
  twoRoleSettings,
} from './two-roles.js';
export {
  demoVerifierPrompt,
  PolicyVerifierEngine,
  type PolicyVerifierOptions,
  parseVerifierReply,
  verifierReply,
} from './verifier-role.js';
