// The console's code editor, bundled by build.mjs into ../assets/editor.bundle.js (the
// bundle is committed and embedded; scripts/check-console-bundle.sh proves it is what
// this file and package-lock.json build). CodeMirror 6: a syntax mode per config type,
// undo/redo, search, bracket matching, Tab/Shift+Tab indenting the selection, the line
// of a validation error marked; and its merge view for every diff the console shows.

import { EditorState, Compartment, StateField, StateEffect, RangeSetBuilder } from '@codemirror/state';
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection,
  highlightSpecialChars, Decoration, gutterLineClass, GutterMarker, rectangularSelection, dropCursor,
} from '@codemirror/view';
import { defaultKeymap, history, historyKeymap, indentMore, indentLess, insertTab } from '@codemirror/commands';
import {
  syntaxHighlighting, HighlightStyle, bracketMatching, indentOnInput, indentUnit, StreamLanguage, foldGutter, foldKeymap,
} from '@codemirror/language';
import { searchKeymap, highlightSelectionMatches, search } from '@codemirror/search';
import { MergeView, unifiedMergeView } from '@codemirror/merge';
import { tags as t } from '@lezer/highlight';
import { json } from '@codemirror/lang-json';
import { yaml } from '@codemirror/lang-yaml';
import { xml } from '@codemirror/lang-xml';
import { properties } from '@codemirror/legacy-modes/mode/properties';
import { toml } from '@codemirror/legacy-modes/mode/toml';
import { html } from '@codemirror/legacy-modes/mode/xml';

/** The config types the console knows, in the order its type picker lists them. */
export const TYPES = ['yaml', 'properties', 'json', 'xml', 'toml', 'text', 'html'];

function language(type) {
  switch (type) {
    case 'yaml': return yaml();
    case 'json': return json();
    case 'xml': return xml();
    case 'properties': return StreamLanguage.define(properties);
    case 'toml': return StreamLanguage.define(toml);
    case 'html': return StreamLanguage.define(html);
    default: return [];
  }
}

// Colours from the console's CSS variables, so the light and dark themes both apply.
const colours = HighlightStyle.define([
  { tag: [t.propertyName, t.definition(t.propertyName), t.attributeName, t.keyword], color: 'var(--k)' },
  { tag: [t.string, t.special(t.string), t.attributeValue, t.content], color: 'var(--s)' },
  { tag: [t.number, t.bool, t.null, t.atom], color: 'var(--n)' },
  { tag: [t.comment, t.lineComment, t.blockComment, t.meta], color: 'var(--c)', fontStyle: 'italic' },
  { tag: [t.tagName, t.typeName, t.heading, t.labelName], color: 'var(--t)' },
  { tag: [t.punctuation, t.operator, t.separator, t.bracket, t.angleBracket], color: 'var(--p)' },
  { tag: t.invalid, color: 'var(--danger)' },
]);

const theme = EditorView.theme({
  '&': { height: '100%', backgroundColor: 'var(--code-bg)', color: 'var(--fg)', fontSize: '13px' },
  '.cm-scroller': { fontFamily: 'ui-monospace, "JetBrains Mono", Menlo, Consolas, monospace', lineHeight: '20px' },
  '.cm-content': { caretColor: 'var(--fg)' },
  '.cm-cursor, .cm-dropCursor': { borderLeftColor: 'var(--fg)' },
  // The selection is drawn under the text: selected text keeps its colours.
  '&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground, .cm-selectionBackground, .cm-content ::selection':
    { backgroundColor: 'var(--selbg) !important' },
  '.cm-gutters': { backgroundColor: 'var(--code-bg)', color: 'var(--muted)', borderRight: '1px solid var(--line)' },
  '.cm-activeLine': { backgroundColor: 'color-mix(in srgb, var(--sel) 30%, transparent)' },
  '.cm-activeLineGutter': { backgroundColor: 'transparent', color: 'var(--fg)' },
  '.cm-errline': { backgroundColor: 'var(--errline)' },
  '.cm-gutterElement.bad': { color: '#fff', backgroundColor: 'var(--danger)', borderRadius: '3px' },
  '.cm-matchingBracket': { outline: '1px solid var(--muted)', backgroundColor: 'transparent' },
  '.cm-panels': { backgroundColor: 'var(--panel)', color: 'var(--fg)' },
  '.cm-searchMatch': { backgroundColor: 'color-mix(in srgb, var(--warn) 30%, transparent)' },
});

// The line of a validation error: a line decoration and the gutter's number marked.
const setErrorLine = StateEffect.define();
const errorLine = StateField.define({
  create: () => 0,
  update(line, tr) {
    for (const e of tr.effects) if (e.is(setErrorLine)) return e.value;
    return tr.docChanged && line ? Math.min(line, tr.state.doc.lines) : line;
  },
});
const badMarker = new class extends GutterMarker { elementClass = 'bad'; }();
const errorDecorations = [
  EditorView.decorations.compute([errorLine, 'doc'], (state) => {
    const line = state.field(errorLine);
    const b = new RangeSetBuilder();
    if (line && line <= state.doc.lines) b.add(state.doc.line(line).from, state.doc.line(line).from, Decoration.line({ class: 'cm-errline' }));
    return b.finish();
  }),
  gutterLineClass.compute([errorLine, 'doc'], (state) => {
    const line = state.field(errorLine);
    const b = new RangeSetBuilder();
    if (line && line <= state.doc.lines) b.add(state.doc.line(line).from, state.doc.line(line).from, badMarker);
    return b.finish();
  }),
];

// Tab: with a selection, indent its lines; with none, insert two spaces. Shift+Tab
// unindents. Both are transactions, so Ctrl+Z restores. (Esc then Tab leaves the editor:
// CodeMirror's tab-focus mode, so keyboard users are not trapped.)
function tab(view) {
  if (view.state.readOnly) return false;
  if (view.state.selection.ranges.some((r) => !r.empty)) return indentMore(view);
  view.dispatch(view.state.replaceSelection(view.state.facet(indentUnit)), { scrollIntoView: true, userEvent: 'input' });
  return true;
}

// The page's Content-Security-Policy admits CodeMirror's <style> element by this nonce
// (the server puts a fresh one in the index page and in its policy).
const nonce = typeof document !== 'undefined' ? document.querySelector('meta[name="csp-nonce"]')?.content : undefined;

// The words CodeMirror itself shows (search panel, folding, merge view) in the page's
// language: `setPhrases({...})` before creating editors (EditorState.phrases).
let phrases = {};
export function setPhrases(p) { phrases = p || {}; }

function common(type, readOnly) {
  return [
    EditorState.phrases.of(phrases),
    nonce ? EditorView.cspNonce.of(nonce) : [],
    highlightSpecialChars(), history(), drawSelection(), dropCursor(), EditorState.allowMultipleSelections.of(true),
    indentOnInput(), bracketMatching(), rectangularSelection(), highlightSelectionMatches(), search({ top: true }),
    indentUnit.of('  '), EditorState.tabSize.of(2),
    syntaxHighlighting(colours), theme,
    keymap.of([{ key: 'Tab', run: tab, shift: indentLess }, ...defaultKeymap, ...searchKeymap, ...historyKeymap, ...foldKeymap]),
    EditorState.readOnly.of(!!readOnly), EditorView.editable.of(!readOnly),
  ];
}

/**
 * A code editor in `parent` holding `doc`, coloured as `type`. `onChange()` is called
 * after each change of the text (it reads `.value` only if it needs the text).
 */
export function codeEditor(parent, { doc = '', type = 'text', readOnly = false, onChange, label = 'Content' } = {}) {
  const lang = new Compartment();
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), foldGutter(), highlightActiveLine(),
        common(type, readOnly), lang.of(language(type)), errorLine, errorDecorations,
        EditorView.contentAttributes.of({ 'aria-label': label, spellcheck: 'false', autocapitalize: 'off' }),
        EditorView.updateListener.of((u) => { if (u.docChanged && onChange) onChange(u); }),
      ],
    }),
  });
  return {
    view,
    get value() { return view.state.doc.toString(); },
    set value(v) { view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: v } }); },
    get length() { return view.state.doc.length; },
    setType(ty) { view.dispatch({ effects: lang.reconfigure(language(ty)) }); },
    markError(line) { view.dispatch({ effects: setErrorLine.of(line || 0) }); },
    goTo(line) {
      const n = Math.max(1, Math.min(line || 1, view.state.doc.lines));
      const l = view.state.doc.line(n);
      view.dispatch({ selection: { anchor: l.from, head: l.to }, scrollIntoView: true });
      view.focus();
    },
    focus() { view.focus(); },
    destroy() { view.destroy(); },
  };
}

/**
 * A read-only diff of `a` (before) → `b` (after) in `parent`: side by side, or one
 * column (`unified`, for narrow screens) with deleted lines shown above the new ones.
 * Returns `{changed, chunks, destroy}`.
 */
export function mergeView(parent, { a = '', b = '', type = 'text', unified = false } = {}) {
  const ext = [common(type, true), lineNumbers(), language(type)];
  if (unified) {
    const view = new EditorView({
      parent,
      state: EditorState.create({ doc: b, extensions: [ext, unifiedMergeView({ original: a, mergeControls: false, gutter: true, diffConfig: { timeout: 2000 } })] }),
    });
    return { view, changed: a !== b, destroy: () => view.destroy() };
  }
  const mv = new MergeView({
    parent, a: { doc: a, extensions: ext }, b: { doc: b, extensions: ext },
    highlightChanges: true, gutter: true, collapseUnchanged: { margin: 3, minSize: 8 }, diffConfig: { timeout: 2000 },
  });
  return { view: mv, changed: a !== b, chunks: mv.chunks.length, destroy: () => mv.destroy() };
}
