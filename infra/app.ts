/** CDK entry point (cdk.json "app"): `cdk synth`, `cdk deploy FrontierProbe`, ... */
import { buildApp } from './build-app.ts';

const { app } = buildApp();
app.synth();
