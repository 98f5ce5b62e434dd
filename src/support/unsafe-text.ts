// Characters a name must not carry, because a terminal, a log viewer or a browser would not show them as
// themselves: C0 and C1 controls and DEL (terminal escape sequences, forged line breaks); bidirectional
// controls (U+061C, U+200E/200F, U+202A–202E, U+2066–2069), which reorder what follows them so that
// "admin\u202Enimda" reads as another name; zero-width and invisible characters (U+200B–200D, U+2060–2065,
// U+FEFF), which make two different names look the same; and the line and paragraph separators
// (U+2028/2029), which break a line in some viewers and not in others.

/** The characters above as a regular-expression character class body (for `[...]` and `[^...]`). */
export const UNSAFE_NAME_CHARACTERS = '\\u0000-\\u001F\\u007F-\\u009F\\u061C\\u200B-\\u200F\\u2028-\\u202E\\u2060-\\u2069\\uFEFF';

/** How the admin API's validation error names them. */
export const UNSAFE_NAME_CHARACTERS_TEXT = 'control, bidirectional or invisible characters (U+0000–U+001F, U+007F–U+009F, U+061C, U+200B–U+200F, U+2028–U+202E, U+2060–U+2069, U+FEFF)';
