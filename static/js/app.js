/* Ledgerkeep operator UI: the little JavaScript htmx does not do (docs/design.md section 8).
 *
 * 1. Errors keep the page: a 4xx reply whose HTML carries an element with the target's own id is
 *    that fragment's error state and is swapped in place; any other error reply (404, 500, a
 *    Django error page, a network failure) becomes a toast, the page stays as it was. Same code
 *    with DEBUG on and off (django-htmx's DEBUG handler, which replaces the page, is not loaded).
 * 2. State in the URL: after Back/Forward the controls of every form marked data-url-state are
 *    set from the URL (the table and the controls agree), and the header permalink follows the
 *    view an htmx swap pushed.
 * 3. The side panel: Esc closes it; the evidence mark is scrolled into view after a swap.
 * 4. Keyboard shortcuts: j/k next/previous round or row, / search, g jump to seq, ? help.
 * Every link and form works without this file (real hrefs and actions).
 */
(function () {
  "use strict";

  // 1. Errors ---------------------------------------------------------------------------------
  function parse(html) {
    try {
      return new DOMParser().parseFromString(html || "", "text/html");
    } catch (e) {
      return null;
    }
  }

  function errorText(doc, status) {
    if (!doc) return "";
    const pick = (sel) => {
      const el = doc.querySelector(sel);
      return el ? el.textContent.replace(/\s+/g, " ").trim() : "";
    };
    // our 403/404 pages, a fragment's alert, Django's technical 500 page, plain text
    return (
      pick("main [role=alert]") ||
      pick(".exception_value") ||
      pick("#summary pre") ||
      pick("main p") ||
      pick("#summary h1") ||
      pick("h1") ||
      pick("body")
    ).slice(0, 400);
  }

  const REASONS = {
    400: "Bad request",
    401: "Not signed in",
    403: "Not allowed",
    404: "Not found",
    409: "Conflict",
    422: "Not accepted",
    429: "Too many requests",
    500: "Server error",
    502: "Bad gateway",
    503: "Unavailable",
  };

  function toast(title, text, responseHtml) {
    const box = document.getElementById("toasts");
    if (!box) return;
    // the same error again replaces the earlier one instead of piling up
    Array.from(box.querySelectorAll(".toast")).forEach((old) => {
      const head = old.querySelector("strong");
      if (head && head.textContent === title) old.remove();
    });
    const t = document.createElement("div");
    t.className = "toast toast-error";
    t.setAttribute("role", "alert");
    const strong = document.createElement("strong");
    strong.textContent = title;
    t.appendChild(strong);
    if (text) {
      const p = document.createElement("p");
      p.textContent = text;
      t.appendChild(p);
    }
    const actions = document.createElement("p");
    actions.className = "toast-actions";
    if (responseHtml) {
      const open = document.createElement("button");
      open.type = "button";
      open.className = "secondary";
      open.textContent = "Show the full reply";
      open.addEventListener("click", () => {
        const url = URL.createObjectURL(new Blob([responseHtml], { type: "text/html" }));
        window.open(url, "_blank", "noopener");
      });
      actions.appendChild(open);
    }
    const close = document.createElement("button");
    close.type = "button";
    close.textContent = "Dismiss";
    close.addEventListener("click", () => t.remove());
    actions.appendChild(close);
    t.appendChild(actions);
    box.appendChild(t);
    while (box.children.length > 4) box.firstElementChild.remove();
  }
  window.ledgerkeepToast = toast;

  document.addEventListener("htmx:beforeSwap", function (evt) {
    const xhr = evt.detail.xhr;
    if (!xhr || xhr.status < 400) return;
    const target = evt.detail.target;
    const doc = parse(xhr.responseText);
    // a fragment (not a whole page, which carries every region's id) holding the target's id
    const fragment = doc && !doc.getElementById("main");
    const own = fragment && target && target.id && doc.getElementById(target.id);
    if (own && xhr.status < 500) {
      // the fragment's own error state (a refused decision, a bad filter, a context error)
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
      return;
    }
    evt.detail.shouldSwap = false;
    evt.detail.isError = false;
    const title = `${REASONS[xhr.status] || "Error"} (${xhr.status})`;
    toast(title, errorText(doc, xhr.status) + " The page was left as it was.", xhr.status >= 500 ? xhr.responseText : "");
    syncControls(true);
  });
  // the table did not change: its selects and boxes go back to what the URL (and the table)
  // say, so the controls never claim a filter that is not applied; typed text is kept
  document.addEventListener("htmx:sendError", function () {
    toast("The server could not be reached", "Check the connection and try again; the page was left as it was.");
    syncControls(true);
  });
  document.addEventListener("htmx:timeout", function () {
    toast("The server took too long", "Try again; the page was left as it was.");
    syncControls(true);
  });
  // a request that worked clears the errors of earlier ones; toasts never go into the
  // history snapshot (Back would bring them back)
  document.addEventListener("htmx:afterRequest", function (evt) {
    const xhr = evt.detail && evt.detail.xhr;
    if (evt.detail && evt.detail.successful && xhr && xhr.status < 400) {
      document.querySelectorAll("#toasts .toast").forEach((t) => t.remove());
    }
  });
  document.addEventListener("htmx:beforeHistorySave", function () {
    document.querySelectorAll("#toasts .toast").forEach((t) => t.remove());
  });
  document.addEventListener("htmx:historyCacheMissLoadError", function () {
    toast("This page could not be restored", "Reload it to see it again.");
  });

  // 2. State in the URL -------------------------------------------------------------------------
  function syncControls(choicesOnly) {
    const params = new URLSearchParams(location.search);
    document.querySelectorAll("form[data-url-state]").forEach((form) => {
      form.querySelectorAll("input[name], select[name], textarea[name]").forEach((el) => {
        if (el.type === "hidden" || el.type === "submit") return;
        const choice = el.tagName === "SELECT" || el.type === "checkbox" || el.type === "radio";
        if (choicesOnly === true && !choice) return;
        const value = params.get(el.name);
        if (el.type === "checkbox" || el.type === "radio") {
          el.checked = params.getAll(el.name).includes(el.value);
        } else if (el.tagName === "SELECT") {
          const want = value === null ? (el.dataset.default || "") : value;
          const option = Array.from(el.options).find((o) => o.value === want);
          el.value = option ? want : el.options.length ? el.options[0].value : "";
        } else {
          el.value = value === null ? "" : value;
        }
      });
    });
  }

  function syncPermalink(root) {
    const link = document.getElementById("permalink");
    if (!link) return;
    const src = root && root.closest ? root.closest("[data-permalink]") || root.querySelector("[data-permalink]") : null;
    if (src && src.dataset.permalink) link.href = src.dataset.permalink;
    else link.href = location.href;
  }

  document.body.addEventListener("htmx:historyRestore", function () {
    syncControls();
    syncPermalink(document.querySelector("[data-permalink]"));
  });
  window.addEventListener("pageshow", () => syncControls());
  document.body.addEventListener("htmx:pushedIntoHistory", function (evt) {
    syncPermalink(evt.target);
  });
  document.body.addEventListener("htmx:afterSwap", function (evt) {
    const elt = evt.detail.elt;
    if (elt && elt.dataset && elt.dataset.permalink) syncPermalink(elt);
  });
  document.body.addEventListener("htmx:afterSettle", function (evt) {
    const elt = evt.detail.elt;
    // 3. scroll the cited evidence into view in a freshly opened panel
    if (elt && elt.id === "side-panel") {
      const mark = elt.querySelector("mark.cited, mark#quote, mark[id^=chunk-]");
      if (mark) mark.scrollIntoView({ block: "center" });
      const heading = elt.querySelector("h2");
      if (heading) heading.focus({ preventScroll: true });
    }
  });

  // 3. Side panel -------------------------------------------------------------------------------
  // the link a panel was opened from stays in view once the page reflows beside the panel
  let panelOpener = null;
  document.body.addEventListener("htmx:beforeRequest", function (evt) {
    const target = evt.detail.target;
    if (target && target.id === "side-panel") panelOpener = evt.detail.elt;
  });
  document.body.addEventListener("htmx:afterSettle", function (evt) {
    const elt = evt.detail.elt;
    if (elt && elt.id === "side-panel" && panelOpener && document.body.contains(panelOpener)) {
      panelOpener.scrollIntoView({ block: "nearest", inline: "nearest" });
    }
    markScrollingTables(document);
  });

  // tables wider than their box get a hint line and edge shadows (static/css/app.css)
  function markScrollingTables(root) {
    root.querySelectorAll(".table-wrap").forEach(function (wrap) {
      const scrolls = wrap.scrollWidth > wrap.clientWidth + 2;
      const hint = wrap.previousElementSibling;
      const hasHint = hint && hint.classList && hint.classList.contains("scroll-hint");
      if (scrolls) {
        wrap.setAttribute("data-scrolls", "");
        if (!hasHint) {
          const p = document.createElement("p");
          p.className = "scroll-hint";
          p.textContent = "More columns to the right: scroll the table sideways.";
          wrap.parentNode.insertBefore(p, wrap);
        }
      } else {
        wrap.removeAttribute("data-scrolls");
        if (hasHint) hint.remove();
      }
    });
  }
  markScrollingTables(document);
  window.addEventListener("resize", function () { markScrollingTables(document); });

  function closePanel() {
    const close = document.querySelector("#side-panel .panel-close");
    if (close) close.click();
  }

  // 4. Keyboard shortcuts -----------------------------------------------------------------------
  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName));
  }

  function step(direction) {
    const items = Array.from(
      document.querySelectorAll("main section.round, main table.facts tbody tr, main table.folds tbody tr, main table.diff tbody tr, main table.sessions tbody tr")
    );
    if (!items.length) return;
    const current = document.querySelector(".kbd-current");
    let i = items.indexOf(current);
    if (i < 0) {
      // first item below the top of the viewport
      i = items.findIndex((el) => el.getBoundingClientRect().top > 4) - (direction > 0 ? 1 : 0);
    }
    const next = items[Math.max(0, Math.min(items.length - 1, i + direction))];
    if (current) current.classList.remove("kbd-current");
    next.classList.add("kbd-current");
    next.scrollIntoView({ block: "start" });
    const link = next.querySelector("a[href]");
    if (link) link.focus({ preventScroll: true });
  }

  document.addEventListener("keydown", function (evt) {
    if (evt.ctrlKey || evt.metaKey || evt.altKey) return;
    const help = document.getElementById("shortcuts");
    if (evt.key === "Escape") {
      if (help && help.open) return; // the dialog closes itself
      closePanel();
      return;
    }
    if (typing(evt.target)) return;
    if (evt.key === "?") {
      evt.preventDefault();
      if (help && !help.open) help.showModal();
    } else if (evt.key === "/") {
      const box = document.querySelector("main input[type=search]");
      if (box) {
        evt.preventDefault();
        box.focus();
        box.select();
      }
    } else if (evt.key === "g") {
      const jump = document.getElementById("jump-seq");
      if (jump) {
        evt.preventDefault();
        jump.focus();
      }
    } else if (evt.key === "j") {
      step(1);
    } else if (evt.key === "k") {
      step(-1);
    }
  });
})();
