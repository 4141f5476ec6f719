// Not part of the app: loads every package's public entry points, so that building this app
// typechecks all their declarations (NodeNext, skipLibCheck off) and running it loads them all.
import * as agent from '@flowgrpo/agent';
import * as agentTesting from '@flowgrpo/agent/testing';
import * as core from '@flowgrpo/core';
import * as gateway from '@flowgrpo/gateway';
import * as graph from '@flowgrpo/graph';
import * as graphTesting from '@flowgrpo/graph/testing';
import * as grpo from '@flowgrpo/grpo';
import * as models from '@flowgrpo/models';
import * as modelsTesting from '@flowgrpo/models/testing';
import * as reward from '@flowgrpo/reward';
import * as tools from '@flowgrpo/tools';
import * as trainer from '@flowgrpo/trainer';
import * as trainerDemo from '@flowgrpo/trainer/demo';
import * as viewer from '@flowgrpo/viewer';

const entries = {
  agent,
  agentTesting,
  core,
  gateway,
  graph,
  graphTesting,
  grpo,
  models,
  modelsTesting,
  reward,
  tools,
  trainer,
  trainerDemo,
  viewer,
};
for (const [name, exports] of Object.entries(entries)) {
  console.log(`${name}: ${Object.keys(exports).length} exports`);
}
