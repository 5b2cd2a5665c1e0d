// Launching Debian's chromium for the console's browser tests: playwright-core with the
// system browser (Playwright's own download cannot work here), headless, a fresh profile.

import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
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
    viewport: { width: 1366, height: 820 },
    colorScheme: 'light',
  });
  return { context, cleanup: async () => { await context.close(); rmSync(profile, { recursive: true, force: true }); } };
}

