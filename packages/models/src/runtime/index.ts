export { type CpuKernelInfo, cpuKernelInfo, type KernelIsa, kernelIsa } from './cpu-kernels.js';
export { DeviceTensor, type DeviceTensorLocation, DeviceTensorStore } from './device-tensor.js';
export {
  CUDA_FIX,
  chooseDevice,
  type DeviceAvailability,
  type DeviceChoice,
  type DeviceRequest,
  deviceAvailability,
  hasVulkanLoader,
  listBackends,
  listDevices,
  type ProbeResult,
  probeExecutionProvider,
  resolveDevice,
  WEBGPU_FIX,
} from './devices.js';
export {
  type Device,
  DeviceTensorAccessError,
  ExecutionProviderUnavailableError,
  type FeedProblem,
  InvalidFeedError,
  ModelLoadError,
  SessionRunError,
  SessionWorkerError,
} from './errors.js';
export { type FeedLike, type ValueSpec, validateFeeds } from './feeds.js';
export { fromOrtTensor, toOrtTensor } from './host-tensor.js';
export {
  type CreateSessionOptions,
  createSession,
  type FeedValue,
  type LogSeverity,
  type RunResult,
  Session,
} from './session.js';
export {
  SessionWorker,
  startModuleWorker,
  type WorkerRunOptions,
  WorkerSession,
  type WorkerSessionOptions,
} from './session-worker.js';
export {
  hasGpuDeviceNode,
  softwareVulkanAdapter,
  type VulkanDriver,
  vulkanDrivers,
} from './vulkan-drivers.js';
