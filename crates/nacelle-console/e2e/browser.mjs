// Launching Debian's chromium for the console's browser tests: playwright-core with the
// system browser (Playwright's own download cannot work here), headless, a fresh profile.

import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), 'nacelle-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 800 },
    colorScheme: 'light',
  });
  // CONSOLE_ASSETS=<dir>: the console's assets from that directory instead of the server's
  // embedded copy (editing the pages without rebuilding the binary).
  if (process.env.CONSOLE_ASSETS) {
    const dir = process.env.CONSOLE_ASSETS;
    await context.route('**/nacos/assets/**', async (route) => {
      const name = new URL(route.request().url()).pathname.split('/').pop();
      const type = name.endsWith('.css') ? 'text/css' : name.endsWith('.svg') ? 'image/svg+xml' : 'text/javascript';
      await route.fulfill({ status: 200, contentType: type, body: readFileSync(join(dir, name)) });
    });
  }
  return { context, cleanup: async () => { await context.close(); rmSync(profile, { recursive: true, force: true }); } };
}

