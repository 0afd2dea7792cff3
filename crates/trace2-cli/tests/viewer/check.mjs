// Opens a Chrome trace JSON file in speedscope (the npm package, served from 127.0.0.1) in headless
// Chromium, and prints what the viewer shows as one JSON object on stdout:
//   {"profiles": [name, ...], "sandwich": {profile name: [[symbol, total, self], ...]}, "errors": [...]}
// `profiles` is speedscope's profile list (one per process and thread), `sandwich` the rows of its
// Sandwich table (every slice name with its total and self time as speedscope computes them) for
// each profile. SCREENSHOT.png shows the first profile's timeline.
// Usage: node check.mjs TRACE.json SCREENSHOT.png
// Environment: CHROMIUM (default /usr/bin/chromium), MAX_PROFILES (default 8).

import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const [tracePath, screenshotPath] = process.argv.slice(2);
if (!tracePath || !screenshotPath) {
  console.error('usage: node check.mjs TRACE.json SCREENSHOT.png');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, 'node_modules', 'speedscope', 'dist', 'release');
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.wasm': 'application/wasm', '.png': 'image/png', '.ico': 'image/x-icon', '.woff2': 'font/woff2' };

// A static server for speedscope's files and the trace, on loopback only.
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  const file = url.pathname === '/trace.json'
    ? tracePath
    : path.join(root, path.normalize(decodeURIComponent(url.pathname)).replace(/^([/\\])+/, ''));
  if (!file.startsWith(root) && file !== tracePath) { res.writeHead(403); res.end(); return; }
  fs.readFile(file, (err, body) => {
    if (err) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'content-type': types[path.extname(file)] || 'application/octet-stream' });
    res.end(body);
  });
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = server.address().port;
const base = `http://127.0.0.1:${port}`;

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'trace2-viewer-'));
const flags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  // speedscope draws with WebGL: without a GPU, Chromium's software renderer provides it.
  '--use-angle=swiftshader', '--enable-unsafe-swiftshader'];
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: flags,
  viewport: { width: 1400, height: 900 },
  timeout: 30000,
});
const errors = [];
let result;
try {
  const page = context.pages()[0] || await context.newPage();
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(`${base}/index.html#profileURL=${encodeURIComponent(base + '/trace.json')}`);
  // Loaded when the toolbar names the profile: "<process> (pid N), <thread> (tid N) (1/K)".
  const selector = page.locator('text=/\\(1\\/\\d+\\)$/').first();
  await selector.waitFor({ timeout: 20000 });
  await page.waitForTimeout(300);
  await page.screenshot({ path: screenshotPath });
  await selector.click();
  const profiles = await page.evaluate(() =>
    [...document.querySelectorAll('tr')]
      .filter((tr) => /^\d+$/.test(tr.cells[0]?.innerText.trim()))
      .map((tr) => tr.cells[1].innerText.trim()));
  await selector.click();
  await page.locator('text=Sandwich').first().click();
  const sandwich = {};
  const maxProfiles = Number(process.env.MAX_PROFILES || 8);
  for (let i = 0; i < Math.min(profiles.length, maxProfiles); i++) {
    if (i > 0) {
      await page.locator('text=/\\(\\d+\\/\\d+\\)$/').first().click();
      await page.locator('tr', { hasText: profiles[i] }).first().click();
    }
    await page.waitForTimeout(200);
    sandwich[profiles[i]] = await page.evaluate(() =>
      [...document.querySelectorAll('tr')]
        .map((tr) => [...tr.cells].map((td) => td.innerText.trim()))
        .filter((cells) => cells.length === 3 && /%\)$/.test(cells[0]))
        .map(([total, self, symbol]) => [symbol, total, self]));
  }
  result = { profiles, sandwich };
} finally {
  await context.close();
  server.close();
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
console.log(JSON.stringify({ ...result, errors }));
