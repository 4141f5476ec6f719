// The trainers driven through the policy gateway (@flowgrpo/gateway): online GRPO over recorded
// rollouts, and one LoRA adapter per role.
export {
  MultiRoleGRPOTrainer,
  type MultiRoleGRPOTrainerOptions,
  type MultiRoleTrainResult,
} from './multi-role-trainer.js';
export {
  OnlineGRPOTrainer,
  type OnlineGRPOTrainerOptions,
  rolloutGroupKey,
} from './online-trainer.js';
export {
  chainRow,
  type HostedRoles,
  hostRoles,
  openRoles,
  type RoleSpec,
  type ServedRole,
  saveRoleAdapters,
  trainedRoleSampling,
  updateRole,
} from './role-policies.js';
