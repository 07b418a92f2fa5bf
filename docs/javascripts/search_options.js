// Search for command-line options: "--resize", "--num-thread", "-n".
//
// The site's search (Material for MkDocs on lunr) reads a leading "-" as "without this word",
// so "--resize" was an invalid query ("Invalid query: --resize" in the console, "No matching
// documents" on the page) and "-n" excluded every page with "n". The index splits words at
// "-" (the search plugin's separator, mkdocs.yml), so "--num-thread" in a page is indexed as
// "num" and "thread". This rewrites each option-like word of a query before it reaches the
// search worker: "--resize" becomes "+resize", "--num-thread" becomes "+num +thread": those
// exact words, all of them (a plain word is also matched as the start of longer ones, so
// "resize" finds resize_short, which "--resize" should not). The search box keeps what was
// typed. A hyphenated word ("num-thread") needs all its parts too, the last one as a prefix
// (it may be unfinished). Everything else (words, quotes, "+word") goes through unchanged.
(function () {
  "use strict";
  var QUERY = 2; // Material's SearchMessageType.QUERY: { type: 2, data: "the query" }

  function rewriteWord(word) {
    var option = /^--?([A-Za-z0-9][\w.]*(?:-[\w.]+)*)(=\S*)?$/.exec(word);
    if (option) {
      return option[1].split("-").map(function (part) {
        return "+" + part;
      }).join(" ");
    }
    // num-thread, resize-mode: every part, the last one perhaps still being typed
    var parts = /^\w[\w.]*(?:-[\w.]+)+$/.test(word) ? word.split("-") : null;
    if (parts) {
      return parts.map(function (part, i) {
        return "+" + part + (i === parts.length - 1 ? "*" : "");
      }).join(" ");
    }
    return word;
  }

  function rewriteQuery(query) {
    return query.split(/(\s+)/).map(rewriteWord).join("");
  }

  var post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (message) {
    if (message && message.type === QUERY && typeof message.data === "string") {
      var rewritten = rewriteQuery(message.data);
      if (rewritten !== message.data) {
        message = { type: message.type, data: rewritten };
        arguments[0] = message;
      }
    }
    return post.apply(this, arguments);
  };
  window.recioRewriteSearchQuery = rewriteQuery; // for .ci/site_check.py
})();
