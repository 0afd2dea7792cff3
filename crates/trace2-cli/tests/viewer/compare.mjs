// Opens a `trace2 compare --html` page in headless Chromium with the network cut off, and prints
// what it shows as one JSON object on stdout:
//   {"errors": [...], "requests": [...], "trees": N, "bars": N, "dists": N, "size": [w, h],
//    "pixels": {"slower": N, "faster": N, "unchanged": N, "base": N, "new": N, "ink": N}}
// `errors` are console errors and page errors, `requests` every request the page made beyond
// itself (a self-contained page makes none). The screenshot (SCREENSHOT.png, the full page) is
// read back in the browser: `pixels` counts its pixels near each colour the page uses and
// `ink` those that are not white.
// Usage: node compare.mjs PAGE.html SCREENSHOT.png
// Environment: CHROMIUM (default /usr/bin/chromium).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const [pagePath, screenshotPath] = process.argv.slice(2);
if (!pagePath || !screenshotPath) {
  console.error('usage: node compare.mjs PAGE.html SCREENSHOT.png');
  process.exit(2);
}
const pageUrl = pathToFileURL(path.resolve(pagePath)).href;
const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'trace2-compare-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1200, height: 900 },
  offline: true,
  timeout: 30000,
});
const errors = [];
const requests = [];
let result;
try {
  const page = context.pages()[0] || await context.newPage();
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('request', (r) => { if (r.url() !== pageUrl) requests.push(r.url()); });
  await page.goto(pageUrl, { waitUntil: 'load' });
  const shown = await page.evaluate(() => ({
    trees: document.querySelectorAll('svg.tree').length,
    bars: document.querySelectorAll('svg.tree rect').length,
    dists: document.querySelectorAll('svg.dist').length,
  }));
  const png = await page.screenshot({ path: screenshotPath, fullPage: true });

  // Read the screenshot back: decode it in a blank page and count colours.
  const reader = await context.newPage();
  reader.on('pageerror', (e) => errors.push(String(e)));
  const pixels = await reader.evaluate(async (data) => {
    const image = new Image();
    image.src = 'data:image/png;base64,' + data;
    await image.decode();
    const canvas = document.createElement('canvas');
    canvas.width = image.width;
    canvas.height = image.height;
    const g = canvas.getContext('2d');
    g.drawImage(image, 0, 0);
    const rgba = g.getImageData(0, 0, image.width, image.height).data;
    const colours = {
      slower: [0xd7, 0x30, 0x1f], faster: [0x1a, 0x98, 0x50], unchanged: [0xc8, 0xc8, 0xc8],
      base: [0x3b, 0x6f, 0xb6], new: [0xf2, 0x6b, 0x21],
    };
    const counts = { ink: 0 };
    for (const name of Object.keys(colours)) counts[name] = 0;
    for (let i = 0; i < rgba.length; i += 4) {
      const [r, gr, b] = [rgba[i], rgba[i + 1], rgba[i + 2]];
      if (r < 250 || gr < 250 || b < 250) counts.ink++;
      for (const [name, [cr, cg, cb]] of Object.entries(colours)) {
        if (Math.abs(r - cr) <= 12 && Math.abs(gr - cg) <= 12 && Math.abs(b - cb) <= 12) counts[name]++;
      }
    }
    return { counts, size: [image.width, image.height] };
  }, png.toString('base64'));
  result = { ...shown, size: pixels.size, pixels: pixels.counts };
} finally {
  await context.close();
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
console.log(JSON.stringify({ ...result, errors, requests }));
