// The course website's few additions to the theme's behaviour (loaded with `defer` on every page, so it runs after
// Sphinx's own scripts and before the search starts).
"use strict";

// A fragment ("#résumé" arrives as "#r%C3%A9sum%C3%A9") as the id it names. A badly encoded one ("#100%") makes
// decodeURIComponent throw URIError; it is then taken as it stands, so the page and its links keep working.
function fragmentId(hash) {
  const raw = hash.startsWith("#") ? hash.slice(1) : hash;
  try {
    return decodeURIComponent(raw);
  } catch (error) {
    return raw;
  }
}

// 1. Search snippets come from the page's article, not from the theme's menus around it. Sphinx takes the text of
// [role="main"], which in this theme also holds the article's header buttons ("Light Dark") and the page's table of
// contents; a snippet then showed those instead of the body.
if (typeof Search !== "undefined") {
  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    doc.querySelectorAll(".headerlink, script, style").forEach((element) => element.remove());
    const article = doc.querySelector("article.bd-article") || doc.querySelector('[role="main"]');
    if (!article) return "";
    const id = anchor && anchor.startsWith("#") ? fragmentId(anchor) : "";
    const part = id ? doc.getElementById(id) : null;
    const block = part && article.contains(part) ? part : article;
    return block.textContent.replace(/\s+/g, " ");  // one space between words: 240 characters of text, not of gaps
  };
}

// 2. The status line of the search page in the page's language. Sphinx 8 asks its catalogue for the sentence in its
// singular/plural form, which the Chinese catalogue does not have yet; it has the older "page(s)" sentence.
if (typeof Documentation !== "undefined" && Documentation.TRANSLATIONS) {
  const older = Documentation.TRANSLATIONS["Search finished, found ${resultCount} page(s) matching the search query."];
  const singular = "Search finished, found one page matching the search query.";
  if (typeof older === "string" && !(singular in Documentation.TRANSLATIONS)) {
    Documentation.TRANSLATIONS[singular] = [older, older];  // every plural form; Sphinx fills in ${resultCount}
  }
}

// 3. The language switch keeps the query (?q= on the search page) and the place on the page (#fragment). The two
// editions name a section differently (its id comes from its heading), so a section is also found by its number.
const SWITCH_KEY = "course-site-switch";

function sections() {
  return [...document.querySelectorAll("article.bd-article section[id]")];
}

function switchTarget(link) {
  const url = new URL(link.getAttribute("data-base") || link.getAttribute("href"), document.baseURI);
  link.setAttribute("data-base", link.getAttribute("data-base") || link.getAttribute("href"));
  url.search = window.location.search;
  url.hash = window.location.hash;
  link.href = url.href;
  return url;
}

function rememberSection(url) {
  const id = fragmentId(window.location.hash);
  const target = id && document.getElementById(id);
  const section = target && target.closest("section[id]");
  const all = sections();
  if (section && all.includes(section)) {
    try {  // a browser that keeps no session storage (some private modes) just lands at the top of the page
      sessionStorage.setItem(SWITCH_KEY, JSON.stringify(
        {path: url.pathname, id: id, index: all.indexOf(section), count: all.length}));
    } catch (error) {}
  }
}

function findSwitchedSection() {
  let stored = null;
  try {
    stored = sessionStorage.getItem(SWITCH_KEY);
    sessionStorage.removeItem(SWITCH_KEY);
  } catch (error) {}
  const id = fragmentId(window.location.hash);
  if (!stored || !id || document.getElementById(id)) return;  // nothing passed on, or the id exists here too
  const {path, id: from, index, count} = JSON.parse(stored);
  const all = sections();
  if (path !== window.location.pathname || from !== id || all.length !== count) return;  // not the same outline
  history.replaceState(null, "", "#" + encodeURIComponent(all[index].id));
  all[index].scrollIntoView();
}

document.addEventListener("DOMContentLoaded", () => {
  const links = [...document.querySelectorAll("a.course-lang-switch")];
  links.forEach((link) => {
    switchTarget(link);
    link.addEventListener("click", () => rememberSection(switchTarget(link)));
  });
  window.addEventListener("hashchange", () => links.forEach(switchTarget));
  findSwitchedSection();
});
