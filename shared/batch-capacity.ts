/**
 * Why a GPU job never started, in words a person can act on. The platform's GPU queue cancels a
 * job blocked at its head (infra/platform-stack.ts, jobStateTimeLimitActions); Batch's status
 * reason then starts with the blocking reason's code. The usual cause on a new account is an EC2
 * vCPU quota of 0 for G and VT instances: EC2 refuses every launch, which Batch reports as
 * missing capacity.
 */

/** The Service Quotas codes of the EC2 quotas that bound the GPU compute environment (vCPUs). */
export const GPU_QUOTAS = {
  spot: { code: 'L-3819A6DF', name: 'All G and VT Spot Instance Requests' },
  onDemand: { code: 'L-DB2E81BA', name: 'Running On-Demand G and VT instances' },
} as const;

/** The command that shows one of them in the current region. */
export const quotaCommand = (code: string): string => `aws service-quotas get-service-quota --service-code ec2 --quota-code ${code}`;

/** What to do about a job Batch cancelled as blocked, from its status reason; undefined for any other reason. */
export function blockedJobHint(statusReason: string): string | undefined {
  if (statusReason.includes('CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY')) {
    return (
      `no GPU instance could be launched: check the EC2 vCPU quota "${GPU_QUOTAS.spot.name}" (${quotaCommand(GPU_QUOTAS.spot.code)}; ` +
      `for on-demand, ${GPU_QUOTAS.onDemand.code}), or deploy with -c frontier:gpuSpot=false when spot capacity is short`
    );
  }
  if (statusReason.includes('MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE')) {
    return "the job needs more vCPUs than the compute environment's maxvCpus allows: raise gpuMaxvCpus, or ask for fewer vCPUs";
  }
  if (statusReason.includes('MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT')) {
    return "no instance type of the compute environment fits the job's vCPUs, memory and GPUs: size the job for a g6/g5 type (pipelines/steps/gpu-instances.ts)";
  }
  return undefined;
}
