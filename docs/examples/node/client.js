// A Node client for compactlog with @grpc/grpc-js, loading the API's .proto at run time
// (docs/grpc.md): create a LEDGER topic, publish two values of one key, compact, read the
// compacted view, then consume and acknowledge on a durable subscription.
// Usage: node client.js [HOST:PORT]. The .proto comes from COMPACTLOG_PROTO_DIR, else this
// repository's proto/ (an installed compactlog prints its copy: python -m compactlog.protos).
'use strict';
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const protoDir = process.env.COMPACTLOG_PROTO_DIR || path.join(__dirname, '..', '..', '..', 'proto');
const definition = protoLoader.loadSync('compactlog/v1/compactlog.proto', {
  includeDirs: [protoDir],
  longs: String, // uint64 ids as decimal strings: no precision lost past 2^53
  enums: String,
  defaults: true,
  oneofs: true,
});
const v1 = grpc.loadPackageDefinition(definition).compactlog.v1;

const address = process.argv[2] || '127.0.0.1:7650';
const credentials = grpc.credentials.createInsecure();
const admin = new v1.TopicAdmin(address, credentials);
const log = new v1.Log(address, credentials);
const deadline = () => ({ deadline: Date.now() + 30000 });

// A unary call as a promise; a failed one rejects with the gRPC status (err.code, err.details).
function call(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, deadline(), (err, reply) => (err ? reject(err) : resolve(reply)));
  });
}

// A server-streaming Read, collected.
function readAll(request) {
  return new Promise((resolve, reject) => {
    const messages = [];
    const stream = log.Read(request, deadline());
    stream.on('data', (batch) => messages.push(...batch.messages));
    stream.on('error', reject);
    stream.on('end', () => resolve(messages));
  });
}

const show = (id) => `${id.ledgerId}:${id.entryId}`;

async function main() {
  const topic = `node-example-${Date.now()}`;
  await call(admin, 'CreateTopic', { name: topic, kind: 'LEDGER' });
  const records = ['189.1', '190.0'].map((value) => ({ key: Buffer.from('AAPL'), value: Buffer.from(value) }));
  const published = await call(log, 'Publish', { topic, records });
  for (const id of published.ids) console.log(`published ${show(id)}`);

  const status = await call(admin, 'Compact', { topic, wait: true });
  console.log(`compaction ${status.state}: kept ${status.lastRun.kept} of ${status.lastRun.read}`);
  for (const m of await readAll({ topic, readCompacted: true })) {
    console.log(`compacted ${show(m.id)} ${m.key}=${m.value}`);
  }

  const consumed = await call(log, 'Consume', { topic, subscription: 'node-example', maxMessages: 10, waitMs: 1000 });
  for (const m of consumed.messages) console.log(`consumed ${show(m.id)} ${m.key}=${m.value}`);
  const last = consumed.messages[consumed.messages.length - 1];
  await call(log, 'Acknowledge', { topic, subscription: 'node-example', id: last.id, cumulative: true });
  console.log(`acknowledged up to ${show(last.id)}`);

  try {
    await call(admin, 'GetTopic', { name: 'no-such-topic' });
  } catch (err) {
    console.log(`GetTopic no-such-topic: ${grpc.status[err.code]}`);
  }
  admin.close();
  log.close();
}

main().catch((err) => {
  console.error(`compactlog example failed: ${err.message}`);
  process.exit(1);
});
