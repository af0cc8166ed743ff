// mcpsync.apps front-end: one MCP App in a sandboxed iframe, relayed to the kernel.
//
// Shipped inside the mcpsync package and loaded by anywidget from disk; it imports nothing.
// The app runs in <iframe sandbox="allow-scripts" srcdoc=...>: an opaque origin, so it
// cannot reach this page, its cookies or its storage. Its policy (CSP) is the first element
// of the srcdoc. Every JSON-RPC message it posts goes to Python (mcpsync.apps.bridge), which
// answers; this file only relays, enforces the size limit, resizes, and shows link requests.

const THEME_VARIABLES = {
  "--color-background-primary": "--jp-layout-color0",
  "--color-background-secondary": "--jp-layout-color1",
  "--color-text-primary": "--jp-content-font-color1",
  "--color-text-secondary": "--jp-content-font-color2",
  "--color-border-primary": "--jp-border-color1",
  "--font-sans": "--jp-ui-font-family",
  "--font-mono": "--jp-code-font-family",
};

function notebookTheme() {
  const light = document.body && document.body.dataset ? document.body.dataset.jpThemeLight : undefined;
  if (light === "false") return "dark";
  if (light === "true") return "light";
  const vscode = document.body && document.body.classList;
  if (vscode && vscode.contains("vscode-dark")) return "dark";
  return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function notebookVariables() {
  const out = {};
  const style = getComputedStyle(document.body || document.documentElement);
  for (const [name, source] of Object.entries(THEME_VARIABLES)) {
    const value = style.getPropertyValue(source).trim();
    if (value) out[name] = value;
  }
  return out;
}

// one live app per widget: the bridge in Python is one app's (its answers go to every view)
// (keyed by the widget's app_id: each view may get its own model wrapper)
const LIVE = new Set();

function render({ model, el }) {
  const appId = model.get("app_id");
  if (LIVE.has(appId)) {
    const note = document.createElement("div");
    note.className = "mcpsync-app-stopped";
    note.textContent = "This app is shown in another output; call mcpsync.apps.call(...) again to show it here.";
    el.appendChild(note);
    return () => {};
  }
  LIVE.add(appId);
  const root = document.createElement("div");
  root.className = "mcpsync-app";
  if (model.get("border")) root.classList.add("mcpsync-app-border");
  const label = document.createElement("div");
  label.className = "mcpsync-app-label";
  label.textContent = model.get("label");
  const links = document.createElement("div");
  links.className = "mcpsync-app-links";
  const frame = document.createElement("iframe");
  frame.className = "mcpsync-app-frame";
  frame.setAttribute("sandbox", "allow-scripts");
  frame.setAttribute("referrerpolicy", "no-referrer");
  frame.setAttribute("title", model.get("label"));
  frame.style.height = `${model.get("height")}px`;
  root.append(label, links, frame);
  el.appendChild(root);

  let loads = 0;
  let live = true;
  const maxBytes = model.get("max_bytes");

  const stop = (why) => {
    live = false;
    frame.remove();
    const note = document.createElement("div");
    note.className = "mcpsync-app-stopped";
    note.textContent = why;
    root.appendChild(note);
  };

  const toApp = (message) => {
    if (live && frame.contentWindow) frame.contentWindow.postMessage(message, "*");
  };

  const onMessage = (event) => {
    if (!live || event.source !== frame.contentWindow) return; // only our app's frame
    let text;
    try {
      text = JSON.stringify(event.data);
    } catch (err) {
      text = undefined;
    }
    if (text === undefined) {
      toApp({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "the message is not JSON" } });
      return;
    }
    if (text.length > maxBytes) {
      const id = event.data && (typeof event.data.id === "string" || typeof event.data.id === "number") ? event.data.id : null;
      toApp({ jsonrpc: "2.0", id, error: { code: -32600, message: `message of ${text.length} bytes refused (limit ${maxBytes})` } });
      model.send({ kind: "dropped", bytes: text.length });
      return;
    }
    model.send({ kind: "rpc", message: event.data });
  };

  const askLink = (token, url) => {
    const row = document.createElement("div");
    row.className = "mcpsync-app-link";
    const words = document.createElement("span");
    words.textContent = "The app asks to open ";
    const shown = document.createElement("code");
    shown.textContent = url;
    const open = document.createElement("a");
    open.textContent = "Open";
    open.href = url;
    open.target = "_blank";
    open.rel = "noopener noreferrer";
    const dismiss = document.createElement("button");
    dismiss.textContent = "Dismiss";
    const answer = (accepted) => {
      model.send({ kind: "link", token, accepted });
      row.remove();
    };
    open.addEventListener("click", () => answer(true));
    dismiss.addEventListener("click", () => answer(false));
    row.append(words, shown, open, dismiss);
    links.appendChild(row);
  };

  const onCustom = (content) => {
    if (!content || typeof content !== "object") return;
    if (content.kind === "rpc") {
      toApp(content.message);
    } else if (content.kind === "resize") {
      if (typeof content.height === "number") frame.style.height = `${Math.ceil(content.height)}px`;
    } else if (content.kind === "ask-link") {
      askLink(content.token, content.url);
    } else if (content.kind === "open") {
      window.open(content.url, "_blank", "noopener,noreferrer");
    }
  };

  frame.addEventListener("load", () => {
    loads += 1;
    if (loads > 1) stop("The app navigated away from its document; it was stopped.");
  });
  window.addEventListener("message", onMessage);
  model.on("msg:custom", onCustom);
  // the notebook's look first, so ui/initialize answers with it
  const sendHost = () => model.send({ kind: "host", theme: notebookTheme(), variables: notebookVariables() });
  sendHost();
  frame.srcdoc = model.get("srcdoc");
  // JupyterLab switches themes by changing attributes of <body>: tell the app
  let lastTheme = notebookTheme();
  const themeWatch = new MutationObserver(() => {
    const now = notebookTheme();
    if (now !== lastTheme) {
      lastTheme = now;
      sendHost();
    }
  });
  if (document.body) themeWatch.observe(document.body, { attributes: true });

  return () => {
    live = false;
    LIVE.delete(appId);
    themeWatch.disconnect();
    window.removeEventListener("message", onMessage);
    model.off("msg:custom", onCustom);
  };
}

export default { render };
