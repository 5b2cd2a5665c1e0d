// The console's two languages, English and Chinese (简体中文). Every string a page shows
// goes through `t()`, looked up by its English text (`t('Configs')`, `t('Page {n}', {n})`)
// in the Chinese catalogue `zh.js`. The language is the one chosen with the header's
// switch (remembered in localStorage), else the browser's (`zh…` → Chinese), else English;
// dates follow it (`locale()`).

import { ZH, ZH_EDITOR } from './zh.js';
import { setPhrases } from './editor.bundle.js';

const KEY = 'nacelle.lang';

function initial() {
  let saved = null;
  try { saved = localStorage.getItem(KEY); } catch { /* no storage: the browser's */ }
  if (saved === 'en' || saved === 'zh') return saved;
  return (navigator.languages || [navigator.language || '']).some((l) => /^zh\b/i.test(l)) ? 'zh' : 'en';
}

let current = initial();
document.documentElement.lang = current === 'zh' ? 'zh-CN' : 'en';
setPhrases(current === 'zh' ? ZH_EDITOR : {});

export const lang = () => current;
export function setLang(l) {
  current = l === 'zh' ? 'zh' : 'en';
  try { localStorage.setItem(KEY, current); } catch { /* not remembered */ }
  document.documentElement.lang = current === 'zh' ? 'zh-CN' : 'en';
  setPhrases(current === 'zh' ? ZH_EDITOR : {});
}
/** The locale dates and numbers are shown in. */
export const locale = () => (current === 'zh' ? 'zh-CN' : (navigator.language || 'en'));

const missing = new Set();
/** `s` in the current language, `{name}` placeholders filled from `vars`. */
export function t(s, vars) {
  let out = s;
  if (current === 'zh') {
    if (Object.prototype.hasOwnProperty.call(ZH, s)) out = ZH[s];
    else missing.add(s);
  }
  if (vars) out = out.replace(/\{(\w+)\}/g, (m, k) => (k in vars ? String(vars[k]) : m));
  return out;
}

// For the browser test: the strings asked for in Chinese that the catalogue lacks (none
// may be), and the catalogue's English keys whose Chinese differs (none may be left on a
// Chinese page; "Data ID" and "Group" stay as Nacos's Chinese console writes them).
window.__i18n = { missing: () => [...missing], keys: () => Object.keys(ZH).filter((k) => ZH[k] !== k) };
