/** A pipeline of N chained Pass states: the runtime's per-transition overhead, nothing else. */
import { Stack, type StackProps } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { z } from 'zod';
import { PipelineStateMachine, type StepResources } from '#pipelines/steps/index.ts';
import type { PipelineEntry } from '#infra/registry.ts';

export const CHAIN_LENGTH = 200;

class ChainStack extends Stack {
  constructor(scope: Construct, id: string, props: StackProps & { resources: StepResources }) {
    super(scope, id, props);
    let chain: sfn.Chain | undefined;
    for (let i = 0; i < CHAIN_LENGTH; i++) {
      const pass = new sfn.Pass(this, `P${i}`, { parameters: { i: i, 'config.$': '$.config' } });
      chain = chain ? chain.next(pass) : sfn.Chain.start(pass);
    }
    new PipelineStateMachine(this, 'Pipeline', { pipeline: 'bench-chain', definition: chain!, resources: props.resources });
  }
}

export const CHAIN_PIPELINE: PipelineEntry = {
  name: 'bench-chain',
  stackId: 'BenchChain',
  description: `${CHAIN_LENGTH} chained Pass states`,
  config: z.object({}).passthrough(),
  smoke: {},
  create: (scope, id, props) => new ChainStack(scope, id, props),
};
