/**
 * The GPU instance types the platform's GPU compute environment launches (g6 and g5 families),
 * and how much of each a Batch job can ask for.
 *
 * A job lands on an instance only if its vCPU, memory and GPU requests fit what the ECS agent
 * registers. vCPUs and GPUs register whole; memory does not: the agent registers what the
 * operating system reports (the kernel and firmware keep part of the installed memory) less
 * 32 MiB it reserves. AWS's own example is an m4.large: 8,192 MiB installed, 7,985 MiB reported
 * (97.5 %). A job asking for the installed 16,384 MiB of a g6.xlarge therefore never fits one:
 * Batch launches a 2xlarge instead, 20 to 25 % dearer per hour, and the extra vCPUs sit idle.
 *
 * `registrableMemoryMiB` models the registered memory with a margin: 94 % of the installed memory
 * (GPU AMIs keep more for the NVIDIA driver's tables than the docs' m4.large), less the agent's
 * 32 MiB. On a deployed account the real figure is the container instance's registered MEMORY
 * (`aws ecs describe-container-instances`), which should stay above the model's.
 */
import { ConfigError } from '#shared/errors.ts';

export interface GpuInstance {
  readonly vcpus: number;
  readonly gpus: number;
  /** Installed memory, MiB. */
  readonly memoryMiB: number;
  /** GPU memory per GPU, GiB. */
  readonly gpuMemoryGiB: number;
}

/** Single-GPU sizes of the two families (on-demand list prices in us-east-1: g6.xlarge 0.8048 USD/h, g5.xlarge 1.006 USD/h). */
export const GPU_INSTANCES = {
  'g6.xlarge': { vcpus: 4, gpus: 1, memoryMiB: 16_384, gpuMemoryGiB: 24 },
  'g6.2xlarge': { vcpus: 8, gpus: 1, memoryMiB: 32_768, gpuMemoryGiB: 24 },
  'g6.4xlarge': { vcpus: 16, gpus: 1, memoryMiB: 65_536, gpuMemoryGiB: 24 },
  'g5.xlarge': { vcpus: 4, gpus: 1, memoryMiB: 16_384, gpuMemoryGiB: 24 },
  'g5.2xlarge': { vcpus: 8, gpus: 1, memoryMiB: 32_768, gpuMemoryGiB: 24 },
  'g5.4xlarge': { vcpus: 16, gpus: 1, memoryMiB: 65_536, gpuMemoryGiB: 24 },
} as const satisfies Record<string, GpuInstance>;

export type GpuInstanceType = keyof typeof GPU_INSTANCES;

/** The instance a GPU job is sized for unless it names another: the smallest and cheapest. */
export const DEFAULT_GPU_INSTANCE: GpuInstanceType = 'g6.xlarge';

/** Memory the ECS agent reserves for itself on Batch's default AMIs, MiB. */
export const ECS_RESERVED_MEMORY_MIB = 32;

/** Share of the installed memory the model assumes the operating system reports. */
const REPORTED_SHARE = 0.94;

/** Memory a job can ask for on `type` and still be placed there, MiB (the model above). */
export function registrableMemoryMiB(type: GpuInstanceType): number {
  return Math.floor(GPU_INSTANCES[type].memoryMiB * REPORTED_SHARE) - ECS_RESERVED_MEMORY_MIB;
}

/** The default memory of a job sized for `type`: the registrable memory rounded down to 512 MiB. */
export function defaultGpuJobMemoryMiB(type: GpuInstanceType): number {
  return Math.floor(registrableMemoryMiB(type) / 512) * 512;
}

/** Throws a ConfigError naming the field when a GPU job's requests do not fit `type`. */
export function checkFitsInstance(job: string, type: string, request: { vcpus: number; memoryMiB: number; gpus: number }): void {
  if (!Object.hasOwn(GPU_INSTANCES, type)) {
    throw new ConfigError('instanceType', type, `must be one of ${Object.keys(GPU_INSTANCES).join(', ')} (the GPU compute environment's g6/g5 sizes)`);
  }
  const instance = GPU_INSTANCES[type as GpuInstanceType];
  const memory = registrableMemoryMiB(type as GpuInstanceType);
  if (request.gpus > instance.gpus) throw new ConfigError('gpus', request.gpus, `job ${job}: a ${type} has ${instance.gpus} GPU`);
  if (request.vcpus > instance.vcpus) throw new ConfigError('vcpus', request.vcpus, `job ${job}: a ${type} has ${instance.vcpus} vCPUs`);
  if (request.memoryMiB > memory) {
    throw new ConfigError(
      'memory',
      `${request.memoryMiB} MiB`,
      `job ${job}: a ${type} registers about ${memory} MiB for jobs (${instance.memoryMiB} MiB installed); ask for at most that, or size the job for a larger instance type (instanceType)`,
    );
  }
}
