// The VS Code extension for Remit: the grammar and language configuration are declared in
// package.json; this file starts `remitc lsp` (docs/editors.md) for .rmt and .rmti files through
// vscode-languageclient. Plain JavaScript, so there is nothing to build: `npm ci` and load it.
'use strict';

const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

let client;

function createClient() {
  const command = vscode.workspace.getConfiguration('remit').get('server.path') || 'remitc';
  // TransportKind.stdio adds --stdio, which `remitc lsp` accepts.
  const serverOptions = { command, args: ['lsp'], transport: TransportKind.stdio };
  const clientOptions = {
    documentSelector: [
      { scheme: 'file', language: 'remit' },
      { scheme: 'untitled', language: 'remit' },
    ],
    // Programs are checked against the host.rmti and policy.toml on disk when those are not open:
    // tell the server when they change.
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher('**/{host.rmti,policy.toml}') },
  };
  return new LanguageClient('remit', 'Remit', serverOptions, clientOptions);
}

async function activate(context) {
  client = createClient();
  context.subscriptions.push(
    vscode.commands.registerCommand('remit.restartServer', async () => {
      if (client) await client.stop();
      client = createClient();
      await client.start();
    }),
  );
  await client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
