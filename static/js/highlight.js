// A small syntax highlighter for code blocks in answers (our own code; no CDN, no build step).
// It reads each block's text and rebuilds it from text nodes and <span class="tok-…"> elements, so it can
// never turn text into markup. Good enough for comments, strings, numbers and keywords of common languages.
// Exports highlight(root): every `pre > code` under root, highlighted once, with a Copy button.
const KEYWORDS = {
  python: "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield match case self",
  js: "async await break case catch class const continue debugger default delete do else export extends false finally for function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield",
  sh: "if then else elif fi for while do done case esac function in return export local echo cd set unset exit",
  go: "break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false",
  rust: "as async await break const continue crate else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while",
  sql: "select from where insert into values update set delete create table drop alter join left right inner outer on group by order having limit as and or not null is in like primary key",
  c: "auto break case char const continue default do double else enum extern float for goto if int long register return short signed sizeof static struct switch typedef union unsigned void volatile while class public private protected namespace template typename new delete true false nullptr",
};
const ALIASES = { py: "python", python3: "python", javascript: "js", ts: "js", typescript: "js", json: "js", jsx: "js", tsx: "js", bash: "sh", shell: "sh", zsh: "sh", console: "sh", golang: "go", rs: "rust", cpp: "c", "c++": "c", java: "c", cs: "c", csharp: "c", h: "c", postgres: "sql", sqlite: "sql" };
const HASH_COMMENT = new Set(["python", "sh"]);

function rules(lang) {
  const comment = HASH_COMMENT.has(lang) ? "#[^\\n]*" : lang === "sql" ? "--[^\\n]*" : "\\/\\/[^\\n]*|\\/\\*[\\s\\S]*?\\*\\/";
  const strings = lang === "python" ? "\"\"\"[\\s\\S]*?\"\"\"|'''[\\s\\S]*?'''|" : "";
  return new RegExp(
    "(" + comment + ")|(" + strings + "\"(?:\\\\.|[^\"\\\\\\n])*\"|'(?:\\\\.|[^'\\\\\\n])*'|`(?:\\\\.|[^`\\\\])*`)|(\\b\\d[\\d_]*(?:\\.\\d+)?(?:e[+-]?\\d+)?\\b)|([A-Za-z_][A-Za-z0-9_]*)",
    "g"
  );
}

function highlightBlock(code) {
  const cls = Array.from(code.classList).find((c) => c.startsWith("language-"));
  if (!cls || code.dataset.highlighted) return;
  let lang = cls.slice(9).toLowerCase();
  lang = ALIASES[lang] || lang;
  if (!KEYWORDS[lang]) return;
  const words = new Set(KEYWORDS[lang].split(" ").map((w) => (lang === "sql" ? w.toLowerCase() : w)));
  const text = code.textContent;
  const out = document.createDocumentFragment();
  const re = rules(lang);
  let at = 0;
  let m;
  const span = (kind, s) => {
    const node = document.createElement("span");
    node.className = "tok-" + kind;
    node.textContent = s;
    return node;
  };
  while ((m = re.exec(text)) !== null) {
    let kind = null;
    if (m[1] !== undefined) kind = "comment";
    else if (m[2] !== undefined) kind = "string";
    else if (m[3] !== undefined) kind = "number";
    else if (m[4] !== undefined && words.has(lang === "sql" ? m[4].toLowerCase() : m[4])) kind = "keyword";
    if (!kind) continue;
    if (m.index > at) out.appendChild(document.createTextNode(text.slice(at, m.index)));
    out.appendChild(span(kind, m[0]));
    at = m.index + m[0].length;
  }
  if (at < text.length) out.appendChild(document.createTextNode(text.slice(at)));
  code.replaceChildren(out);
  code.dataset.highlighted = "1";
}

function addCopy(pre) {
  if (pre.querySelector(".copy-code") || !navigator.clipboard) return;
  const b = document.createElement("button");
  b.type = "button";
  b.className = "copy-code small";
  b.textContent = "Copy";
  b.setAttribute("aria-label", "Copy code");
  b.addEventListener("click", () => {
    const code = pre.querySelector("code");
    navigator.clipboard.writeText(code ? code.textContent : pre.textContent).then(() => { b.textContent = "Copied"; });
  });
  pre.appendChild(b);
}

export function highlight(root) {
  root.querySelectorAll("pre > code").forEach((code) => {
    highlightBlock(code);
    addCopy(code.parentElement);
  });
}
