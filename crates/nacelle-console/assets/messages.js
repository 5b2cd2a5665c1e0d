// The server's refusals in the user's language. The server words its reasons in English
// (docs/change-requests.md); the ones the console knows are matched here and shown from
// the catalogue (`zh.js`), their values (ids, keys, states) kept. Any other message is
// shown as the server wrote it.

import { t, lang } from './i18n.js';

// The states of a change request, as the pages show them.
export const STATE_WORDS = {
  draft: 'draft', open: 'open', approved: 'approved', rejected: 'rejected', published: 'published', closed: 'closed',
};
export const stateText = (s) => (STATE_WORDS[s] ? t(STATE_WORDS[s]) : s);

// [the server's words, the catalogue's template, the names of the captured values].
const KNOWN = [
  [/^the author of change request (\d+) cannot review it$/, 'You wrote change request {id}: its author cannot approve or reject it.', ['id']],
  [/^only the author of change request (\d+) \(or an administrator\) may (\w+) it$/, 'Only the author of change request {id} (or an administrator) may {what} it.', ['id', 'what']],
  [/^change request (\d+) is stale: (.+) changed since it was based; nothing was written/, 'Change request {id} is stale: {keys} changed since it was written. Nothing was published: look at the diff, then rebase.', ['id', 'keys']],
  [/^change request (\d+) is stale: rebase it/, 'Change request {id} is stale: rebase it on the current configs first.', ['id']],
  [/^change request (\d+) is (\w+) and needs (\d+) approval\(s\) \((\d+) so far\)/, 'Change request {id} is {state} and needs {n} approval(s) ({m} so far): it cannot be published yet.', ['id', 'state', 'n', 'm']],
  [/^change request (\d+) changed meanwhile/, 'Change request {id} changed since this page was loaded: reload it and try again.', ['id']],
  [/^change request (\d+) is (\w+): only an open request is reviewed$/, 'Change request {id} is {state}: only an open request is reviewed.', ['id', 'state']],
  [/^change request (\d+) is (\w+), not a draft$/, 'Change request {id} is {state}, not a draft.', ['id', 'state']],
  [/^change request (\d+) is (\w+)$/, 'Change request {id} is {state}.', ['id', 'state']],
  [/^change request (\d+) not found$/, 'Change request {id} does not exist (or you may not read it).', ['id']],
  [/^a rejection needs a reason$/, 'A rejection needs a reason.', []],
  [/^a comment needs a text$/, 'Write the comment first.', []],
  [/^a change request needs a title$/, 'A change request needs a title.', []],
  [/^config (.+) in namespace '(.*)' is under review policy '(.*)' \((\d+) approval\(s\)\)/, 'Config {key} in namespace {ns} is under review policy {pattern} ({n} approval(s)): change it through a change request.', ['key', 'ns', 'pattern', 'n']],
  [/^an emergency write needs an administrator/, 'Only an administrator may write past a review policy (an emergency publish).', []],
  [/^reviewing a change request needs authentication on/, 'Reviewing needs authentication on: reviewers are users.', []],
  [/^group pattern `(.*)` may hold only/, 'A group pattern holds letters, digits, - _ . : and * only: {pattern} does not.', ['pattern']],
  [/^authorization failed!?$/, 'You do not hold the permission this needs.', []],
];

/** The server's reason `msg` in the user's language, when the console knows it. */
export function serverText(msg) {
  if (typeof msg !== 'string' || lang() !== 'zh') return msg;
  for (const [re, template, names] of KNOWN) {
    const m = re.exec(msg);
    if (!m) continue;
    const vars = {};
    names.forEach((n, i) => { vars[n] = m[i + 1]; });
    if (vars.state) vars.state = stateText(vars.state);
    if (vars.what) vars.what = t(vars.what);
    return t(template, vars);
  }
  return msg;
}
