/**
 * The chapter allow-list (`books/sanitize.ts`), applied to the parsed tree in one walk: nothing
 * the reader sees is lost, still no scripts, handlers or `javascript:`, and big books stay fast (no
 * serialise-and-reparse). What is kept, what is dropped, how URLs are checked, how text
 * and attributes are escaped, and when a chapter is blank.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DomUtils } from "htmlparser2";
import { parseMarkup } from "../../books/markup.ts";
import { sanitizeChapterHtml, sanitizeNodes, sanitizeSvgFile } from "../../books/sanitize.ts";

function clean(html: string): string {
  return sanitizeChapterHtml(html).html;
}

Deno.test("sanitizeChapterHtml() keeps book markup: ids, lang/dir, ruby, tables, figures", () => {
  const html = '<section id="s1" lang="fr" dir="rtl" title="t"><p>Un <ruby>漢<rp>(</rp>' +
    '<rt>kan</rt><rp>)</rp></ruby> <a href="2.html#n1">note</a></p>' +
    '<figure><img src="res/1-a.png" alt="A" width="10"><figcaption>Fig</figcaption></figure>' +
    '<table><tr><td colspan="2">c</td></tr></table><ol start="3" reversed><li>i</li></ol></section>';
  assert.equal(
    clean(html),
    '<section id="s1" lang="fr" dir="rtl" title="t"><p>Un <ruby>漢<rp>(</rp><rt>kan</rt>' +
      '<rp>)</rp></ruby> <a href="2.html#n1">note</a></p><figure><img src="res/1-a.png" alt="A" ' +
      'width="10" /><figcaption>Fig</figcaption></figure><table><tr><td colspan="2">c</td></tr>' +
      '</table><ol start="3" reversed><li>i</li></ol></section>',
  );
});

Deno.test("sanitizeChapterHtml() keeps inline SVG with its text, camel-case elements included", () => {
  const html = '<svg viewBox="0 0 10 10"><defs><linearGradient id="g"><stop offset="0"/>' +
    '</linearGradient><clipPath id="c"><rect width="5"/></clipPath></defs>' +
    '<text x="1">A <tspan>plate</tspan><textPath href="#p">round</textPath></text></svg>';
  assert.equal(
    clean(html),
    '<svg viewbox="0 0 10 10"><defs><linearGradient id="g"><stop offset="0"></stop>' +
      '</linearGradient><clipPath id="c"><rect width="5"></rect></clipPath></defs>' +
      '<text x="1">A <tspan>plate</tspan><textPath href="#p">round</textPath></text></svg>',
  );
});

Deno.test("sanitizeChapterHtml() keeps MathML, not its annotation-xml", () => {
  const html = '<math display="block"><mfrac><mi mathvariant="bold">x</mi><mn>2</mn></mfrac>' +
    '<annotation-xml encoding="text/html"><p>hidden</p></annotation-xml></math>';
  assert.equal(
    clean(html),
    '<math display="block"><mfrac><mi mathvariant="bold">x</mi><mn>2</mn></mfrac></math>',
  );
});

Deno.test("sanitizeChapterHtml() drops scripts, styles, frames and forms with their content", () => {
  for (
    const hostile of [
      "<script>evil()</script>",
      "<style>p{}</style>",
      '<iframe src="https://example.org/">evil</iframe>',
      "<noscript>evil</noscript>",
      "<template><p>evil</p></template>",
      "<textarea>evil</textarea>",
      "<select><option>evil</option></select>",
      '<object data="x.swf"><p>evil</p></object>',
      "<head><title>evil</title></head>",
    ]
  ) {
    assert.equal(clean(`<p>kept</p>${hostile}`), "<p>kept</p>", hostile);
  }
});

Deno.test("sanitizeChapterHtml() unwraps tags it does not allow, keeping their text", () => {
  assert.equal(
    clean('<font color="red">red</font> <center><p class="x" style="y">c</p></center>'),
    "red <p>c</p>",
  );
  // HTML inside SVG, and SMIL animation that could retarget a link, are not kept as elements.
  assert.equal(
    clean('<svg><foreignObject><p>fo</p></foreignObject><animate to="x"/><set to="y"/></svg>'),
    "<svg><p>fo</p></svg>",
  );
});

Deno.test("sanitizeChapterHtml() drops on* handlers and attributes outside the allow-list", () => {
  assert.equal(
    clean(
      '<p onclick="evil()" class="c" style="s" epub:type="chapter" data-x="1">x</p>' +
        '<img src="a.png" onerror="evil()" srcset="b.png 2x">',
    ),
    '<p>x</p><img src="a.png" />',
  );
});

Deno.test("sanitizeChapterHtml() keeps relative, http(s) and mailto URLs and drops every other scheme", () => {
  const kept = ["2.html#n1", "#n1", "res/1-a.png", "https://example.org/a?b=1&c=2", "mailto:a@b.c"];
  for (const url of kept) {
    assert.match(clean(`<a href="${url.replaceAll("&", "&amp;")}">x</a>`), /href=/, url);
  }
  const dropped = [
    "javascript:evil()",
    "JaVaScRiPt:evil()",
    " javascript:evil()",
    "java&#9;script:evil()",
    "&#106;avascript:evil()",
    "java<!-- x -->script:evil()",
    "data:text/html,evil",
    "vbscript:evil",
    "//evil.example/x",
    "\\\\evil.example/x",
  ];
  for (const url of dropped) {
    for (
      const markup of [
        `<a href="${url}">x</a>`,
        `<img src="${url}">`,
        `<video poster="${url}" src="${url}"></video>`,
        `<blockquote cite="${url}">x</blockquote>`,
        `<svg><a xlink:href="${url}"><text>x</text></a><image href="${url}"/></svg>`,
      ]
    ) {
      const out = clean(markup);
      assert.ok(!/href=|src=|poster=|cite=/.test(out), `${markup} → ${out}`);
    }
  }
});

Deno.test("sanitizeChapterHtml() escapes text and attribute values once", () => {
  assert.equal(
    clean('<p title="a &quot;b&quot; &amp; c">1 &lt; 2 &amp;&amp; 3 &gt; 2 &copy; café</p>'),
    '<p title="a &quot;b&quot; &amp; c">1 &lt; 2 &amp;&amp; 3 &gt; 2 © café</p>',
  );
});

Deno.test("sanitizeChapterHtml() drops empty values that mean nothing, keeps alt and booleans", () => {
  assert.equal(
    clean('<p id="" lang="" title="">x</p><img src="a.png" alt=""><audio controls src="a.mp3">'),
    '<p>x</p><img src="a.png" alt="" /><audio controls src="a.mp3"></audio>',
  );
});

Deno.test("sanitizeChapterHtml() writes void elements self-closed and drops comments", () => {
  assert.equal(clean("a<br>b<hr><!-- note -->c<wbr>"), "a<br />b<hr />c<wbr />");
});

Deno.test("sanitizeNodes() keeps CDATA text in SVG and MathML and drops it elsewhere, as HTML does", () => {
  const document = parseMarkup(
    "<p><![CDATA[gone]]></p><svg><text><![CDATA[1 < 2]]></text></svg>",
    { recognizeSelfClosing: true, recognizeCDATA: true },
  );
  assert.equal(sanitizeNodes(document.children).html, "<p></p><svg><text>1 &lt; 2</text></svg>");
});

Deno.test("sanitizeNodes() writes the tree it is given, as the same markup parsed from a string", () => {
  const markup = '<h2 id="c1">One</h2><p>Text <em>x</em><img src="a.png" alt="A"/></p>' +
    '<svg><text>t</text></svg><p onclick="e()">y<script>z</script></p>';
  const document = parseMarkup(markup);
  const body = DomUtils.getChildren(document);
  assert.deepEqual(sanitizeNodes(body), sanitizeChapterHtml(markup));
  // The tree is read, not changed.
  assert.equal(DomUtils.getOuterHTML(document).includes("<script>z</script>"), true);
});

Deno.test("sanitizeNodes() wraps the result, the wrapper's attributes allow-listed too", () => {
  const nodes = parseMarkup("<p>x</p>").children;
  assert.deepEqual(sanitizeNodes(nodes, { name: "div", attribs: { lang: "en", onclick: "e()" } }), {
    html: '<div lang="en"><p>x</p></div>',
    blank: false,
  });
});

Deno.test("sanitizeChapterHtml() says a chapter is blank only when it shows nothing", () => {
  for (
    const blank of [
      "",
      " \n ",
      "<p>&nbsp;</p>",
      "<div><br></div>",
      "<script>x()</script>",
      "<!-- c -->",
    ]
  ) {
    assert.equal(sanitizeChapterHtml(blank).blank, true, blank);
  }
  for (
    const shown of [
      "<p>x</p>",
      '<img src="a.png">',
      "<svg></svg>",
      "<math></math>",
      '<video src="v.mp4"></video>',
      '<audio src="a.mp3"></audio>',
      '<svg><image href="a.png"/></svg>',
    ]
  ) {
    assert.equal(sanitizeChapterHtml(shown).blank, false, shown);
  }
});

Deno.test("sanitizeSvgFile() keeps an SVG file's names in their case and drops its scripts", () => {
  const svg = sanitizeSvgFile(
    '<?xml version="1.0"?><!DOCTYPE svg><svg xmlns="http://www.w3.org/2000/svg" ' +
      'xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 2 2" onload="evil()">' +
      '<script>evil()</script><linearGradient id="g"/><a xlink:href="javascript:evil()">' +
      '<text xml:lang="en"><![CDATA[1 < 2]]></text></a><foreignObject><p>x</p></foreignObject></svg>',
  );
  assert.equal(
    svg,
    '<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" ' +
      'xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 2 2"><linearGradient id="g">' +
      '</linearGradient><a><text xml:lang="en">1 &lt; 2</text></a>x</svg>\n',
  );
});
