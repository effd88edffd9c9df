// lotline's pages: the lineage graphs (Cytoscape.js + dagre), the lot grid's clicks, and the
// action buttons, which call the REST API with the token kept in sessionStorage (never in a URL).
"use strict";

const TOKEN_KEY = "lotline-token";
// A graph opens fitted when its labels are then at least READABLE_LABEL_PX on screen, else at
// the zoom that makes them so, on the node asked for ("fit" shows the whole of it).
const LABEL_FONT_PX = 14;
const READABLE_LABEL_PX = 9;
const READABLE_ZOOM = READABLE_LABEL_PX / LABEL_FONT_PX;

function toast(message, failed) {
  const box = document.getElementById("toast");
  if (!box) return;
  box.textContent = message;
  box.className = failed ? "shown failed" : "shown";
  clearTimeout(box._timer);
  box._timer = setTimeout(() => { box.className = ""; }, 6000);
}

const NO_TOKEN = "Set the API token (top right) to use this.";

// Without a token on a server that requires one, action buttons are disabled and say why; so is a
// button that does not apply (data-applies="false": releasing a job that is not held), with its
// reason (data-why). The backfill's Preview needs the token too, and says so beside itself.
function enableActions() {
  const missing = document.body.dataset.auth === "required" && !sessionStorage.getItem(TOKEN_KEY);
  document.querySelectorAll("button[data-action]").forEach((button) => {
    const applies = button.dataset.applies !== "false";
    button.disabled = missing || !applies;
    button.title = missing ? NO_TOKEN : (applies ? (button.dataset.explain || "") : (button.dataset.why || ""));
  });
  const preview = document.querySelector("button[data-backfill=preview]");
  if (preview) {
    preview.disabled = missing;
    preview.title = missing ? NO_TOKEN : "";
    const hint = document.getElementById("backfill-hint");
    if (hint) hint.textContent = missing ? "Set the API token (top right) to preview: the server asks for it." : "";
  }
}

// What a refused call says to a reader: a 401 in words, anything else with its status.
function refusal(answer, body) {
  if (answer.status === 401) {
    return "the server refused the API token (401): set the right one (top right) and try again.";
  }
  return `${answer.status} ${body.message || answer.statusText}`;
}

// A token is checked against the server before it is kept: an empty OpenLineage batch is a
// write that changes nothing, refused (401) only for a wrong token.
async function tokenAccepted(token) {
  const answer = await fetch("/api/v1/lineage/batch", {
    method: "POST", body: "[]", headers: { "Content-Type": "application/json", Authorization: "Bearer " + token },
  });
  return answer.status !== 401;
}

function setUpToken() {
  const form = document.getElementById("token-form");
  if (!form) return;
  const shown = document.getElementById("token-state");
  const refresh = () => { shown.textContent = sessionStorage.getItem(TOKEN_KEY) ? "token set" : "no token"; };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = document.getElementById("token");
    const token = input.value;
    input.value = "";
    if (!token) {
      sessionStorage.removeItem(TOKEN_KEY);
    } else if (await tokenAccepted(token).catch(() => false)) {
      sessionStorage.setItem(TOKEN_KEY, token);
    } else {
      sessionStorage.removeItem(TOKEN_KEY);
      refresh();
      shown.textContent = "wrong token: the server refused it";
      toast("Wrong token: the server refused it.", true);
      enableActions();
      return;
    }
    refresh();
    enableActions();
  });
  refresh();
}

async function runAction(button) {
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  // JSON, as the server requires of every write (a cross-site form could not send it).
  const headers = { "Content-Type": "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const result = document.getElementById("action-result");
  button.disabled = true;
  try {
    const answer = await fetch(button.dataset.url, { method: button.dataset.action, headers });
    const body = await answer.json().catch(() => ({}));
    if (!answer.ok) {
      const message = `${button.textContent}: ${refusal(answer, body)}`;
      if (result) result.textContent = message;
      toast(message, true);
      return;
    }
    toast(`${button.textContent}: done`, false);
    await refreshAfterAction(button);
  } catch (error) {
    toast(`${button.textContent}: ${error}`, true);
  } finally {
    enableActions();
  }
}

async function refreshAfterAction(button) {
  const panel = button.closest("#lot-panel");
  if (panel && panel.dataset.src) {
    await htmx.ajax("GET", panel.dataset.src, { target: "#lot-panel" });
    await htmx.ajax("GET", window.location.href, { target: "#grid", select: "#grid", swap: "outerHTML" });
    tabStopOfGrid();
    await htmx.ajax("GET", window.location.href, { target: "#totals", select: "#totals", swap: "outerHTML" });
  } else {
    window.location.reload();
  }
}

function setUpClicks() {
  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (button) {
      event.preventDefault();
      runAction(button);
      return;
    }
    const cell = event.target.closest("#grid a.c[data-lot]");
    if (cell) {
      event.preventDefault();
      document.querySelectorAll("#grid a.c.selected").forEach((c) => c.classList.remove("selected"));
      cell.classList.add("selected");
      const panel = document.getElementById("lot-panel");
      panel.dataset.src = cell.getAttribute("href");
      // A failure is shown in the panel (setUpPartialErrors); nothing more to do with it here.
      htmx.ajax("GET", panel.dataset.src, { target: "#lot-panel" })
        .then(() => panel.scrollIntoView({ block: "nearest" }), () => {});
    }
  });
}

// The grid is one tab stop: arrow keys move between its cells (by time along a row, by row up and
// down the same column), Home/End to a row's ends; Enter opens the cell as a click would.
function gridCells(row) {
  return Array.from(row.querySelectorAll("td > .c"));
}

function moveInGrid(event) {
  const cell = event.target.closest("#grid a.c");
  if (!cell) return;
  const row = cell.closest("tr");
  const slots = gridCells(row);
  const column = slots.indexOf(cell);
  const rows = Array.from(row.parentElement.querySelectorAll("tr:not(.axis)"));
  const linked = (list) => list.filter((c) => c.tagName === "A");
  let next = null;
  if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
    const all = Array.from(document.querySelectorAll("#grid a.c"));
    next = all[all.indexOf(cell) + (event.key === "ArrowRight" ? 1 : -1)];
  } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    const step = event.key === "ArrowDown" ? 1 : -1;
    for (let at = rows.indexOf(row) + step; at >= 0 && at < rows.length && !next; at += step) {
      const others = gridCells(rows[at]);
      next = others[column] && others[column].tagName === "A" ? others[column] : null;
      if (!next) {  // a row cut by the range's edge: the nearest cell of it
        const found = linked(others);
        if (found.length) next = found[step > 0 ? 0 : found.length - 1];
      }
    }
  } else if (event.key === "Home" || event.key === "End") {
    const found = linked(slots);
    next = found[event.key === "Home" ? 0 : found.length - 1];
  } else {
    return;
  }
  event.preventDefault();
  if (next) focusCell(next);
}

function focusCell(cell) {
  document.querySelectorAll("#grid a.c[tabindex='0']").forEach((c) => c.setAttribute("tabindex", "-1"));
  cell.setAttribute("tabindex", "0");
  cell.focus();
}

function tabStopOfGrid() {
  const grid = document.getElementById("grid");
  const first = grid && (grid.querySelector("a.c.selected") || grid.querySelector("a.c"));
  if (first) first.setAttribute("tabindex", "0");
}

function setUpGrid() {
  tabStopOfGrid();
  document.addEventListener("keydown", moveInGrid);
}

const STATE_COLOURS = {
  COMPLETED: "#2e8540", RUNNING: "#2b6cb0", FAILED: "#c53030", ABORTED: "#975a16", NEW: "#718096",
  NEVER_RUN: "#a0aec0", current: "#2e8540", superseded: "#a0aec0", failed: "#c53030",
};

// Plain values and data() mappers only: a function in a style is called per node on every style
// pass and defeats Cytoscape's caching (a 500-node graph drew in 2.6 s with them, bench/ui_draw.py).
function graphStyle(large) {
  const coloured = (kinds, property) => Object.entries(STATE_COLOURS).map(([state, colour]) => ({
    selector: kinds.map((kind) => `node[kind = "${kind}"][state = "${state}"]`).join(", "),
    style: { [property]: colour },
  }));
  return [
    { selector: "node", style: {
      label: "data(label)", "font-size": LABEL_FONT_PX, "text-wrap": "wrap", "text-max-width": 160,
      "text-valign": "center", "text-halign": "center", width: 170, height: 34, shape: "round-rectangle",
      "background-color": "#edf2f7", "border-width": 1, "border-color": "#a0aec0", color: "#1a202c",
      "min-zoomed-font-size": large ? 9 : 0,
    } },
    { selector: 'node[kind = "job"], node[kind = "run"]', style: {
      "background-color": "#718096", color: "#fff", "border-width": 0,
    } },
    ...coloured(["job", "run"], "background-color"),
    { selector: 'node[kind = "lot"]', style: { height: 42, "border-color": "#a0aec0", "border-width": 2 } },
    ...coloured(["lot"], "border-color"),
    { selector: "node[?root]", style: { "border-width": 4, "border-color": "#d69e2e" } },
    { selector: "node.focus", style: { "border-width": 4, "border-color": "#d69e2e" } },
    { selector: "edge", style: {
      width: 1.5, "line-color": "#a0aec0", "target-arrow-color": "#a0aec0", "target-arrow-shape": "triangle",
      "curve-style": large ? "haystack" : "bezier", "arrow-scale": 0.8,
    } },
    { selector: ".faded", style: { opacity: 0.15 } },
    { selector: "edge.path", style: { "line-color": "#d69e2e", "target-arrow-color": "#d69e2e", width: 3 } },
    { selector: "node.found", style: { "border-width": 4, "border-color": "#805ad5" } },
    // a collapsed node is tall enough for its name and "(+N hidden)" under it, inside its body
    { selector: "node.collapsed", style: {
      "border-width": 3, "border-style": "dashed", "border-color": "#1a202c", height: COLLAPSED_HEIGHT_PX,
    } },
  ];
}

// Drawing times, as performance marks a reader (bench/ui_draw.py) can ask for: "lotline:graph"
// measures from the graph's JSON received to its first frame drawn, "lotline:page" from the page's
// response received to its first frame drawn.
function measureDrawn(name, since) {
  requestAnimationFrame(() => setTimeout(() => {  // after the next frame is painted
    performance.mark(name + ":drawn");
    performance.measure(name, since, name + ":drawn");
  }));
}

// Large graphs are laid out in layers by layeredPositions instead of dagre, whose ordering and
// placement grow much faster than the graph (most of a second at 500 nodes, bench/ui_draw.py).
const LAYERED_ABOVE_NODES = 200;
// a collapsed node: three lines of 14 px labels (a lot's name and version, then "(+N hidden)")
const COLLAPSED_HEIGHT_PX = 58;
const NODE_SEP_PX = 12, RANK_SEP_PX = 60, NODE_WIDTH_PX = 170, ROW_PX = 42 + NODE_SEP_PX;

// Left to right, as dagre draws: a node's layer is its longest path from a source (in the order
// of a topological walk; an edge that closes a cycle is not followed), its place in the layer the
// mean place of its neighbours in the layers before it (then after it), which keeps most edges
// short and uncrossed. Linear in the graph's size, from the JSON alone (no Cytoscape work).
function layeredPositions(elements) {
  const ids = [], before = new Map(), after = new Map(), waiting = new Map();
  for (const e of elements) {
    if (e.group === "nodes") {
      ids.push(e.data.id);
      before.set(e.data.id, []);
      after.set(e.data.id, []);
      waiting.set(e.data.id, 0);
    }
  }
  for (const e of elements) {
    const { source, target } = e.data;
    if (e.group !== "edges" || source === target || !before.has(source) || !before.has(target)) continue;
    after.get(source).push(target);
    before.get(target).push(source);
    waiting.set(target, waiting.get(target) + 1);
  }
  const layer = new Map(), ready = ids.filter((id) => waiting.get(id) === 0);
  while (layer.size < ids.length) {
    if (!ready.length) ready.push(ids.find((id) => !layer.has(id)));  // a cycle: enter it anywhere
    const id = ready.pop();
    if (layer.has(id)) continue;
    const placed = before.get(id).filter((p) => layer.has(p));
    layer.set(id, placed.reduce((deepest, p) => Math.max(deepest, layer.get(p) + 1), 0));
    for (const t of after.get(id)) {
      waiting.set(t, waiting.get(t) - 1);
      if (waiting.get(t) === 0) ready.push(t);
    }
  }
  const layers = [];
  for (const id of ids) (layers[layer.get(id)] = layers[layer.get(id)] || []).push(id);
  const place = new Map();
  const number = (list) => list.forEach((id, at) => place.set(id, at));
  layers.forEach(number);
  const sweep = (order, neighbours) => {
    for (const list of order) {
      const mean = (id) => {
        const known = neighbours.get(id).filter((n) => layer.get(n) !== layer.get(id));
        return known.length ? known.reduce((sum, n) => sum + place.get(n), 0) / known.length : place.get(id);
      };
      const keys = new Map(list.map((id) => [id, mean(id)]));
      list.sort((a, b) => keys.get(a) - keys.get(b));
      number(list);
    }
  };
  for (let round = 0; round < 2; round += 1) {
    sweep(layers.slice(1), before);
    sweep(layers.slice(0, -1).reverse(), after);
  }
  const positions = {};
  layers.forEach((list, at) => list.forEach((id, row) => {
    positions[id] = { x: at * (NODE_WIDTH_PX + RANK_SEP_PX), y: (row - (list.length - 1) / 2) * ROW_PX };
  }));
  return (node) => positions[node.id()];
}

// How ``elements`` (JSON: the whole graph, or the part a view shows) are laid out: dagre, or in
// layers past LAYERED_ABOVE_NODES nodes.
function graphLayout(elements) {
  return elements.filter((e) => e.group === "nodes").length > LAYERED_ABOVE_NODES
    ? { name: "preset", positions: layeredPositions(elements), fit: false }
    : { name: "dagre", rankDir: "LR", nodeSep: NODE_SEP_PX, rankSep: RANK_SEP_PX, animate: false, fit: false };
}

async function drawGraph(box) {
  const answer = await fetch(box.dataset.src, { headers: { Accept: "application/json" } });
  if (!answer.ok) {  // lotline's {code, message}, or a proxy's plain text: said with the status
    showFailure(box, failureText(answer.status, await answer.text()));
    return null;
  }
  const body = await answer.json();
  performance.mark("lotline:graph:response");
  const large = body.elements.length > 600;
  const cy = cytoscape({
    container: box,
    elements: body.elements,
    style: graphStyle(large),
    layout: graphLayout(body.elements),
    minZoom: 0.02,
    maxZoom: 3,
    textureOnViewport: large,
    hideEdgesOnViewport: large,
    pixelRatio: large ? 1 : "auto",
  });
  const focus = cy.getElementById(box.dataset.focus);
  if (focus.nonempty()) focus.addClass("focus");
  openView(cy, cy.nodes(), focus.nonempty() ? focus : cy.nodes()[0]);
  cy.on("tap", "node", (event) => highlight(cy, event.target, box));
  cy.on("tap", (event) => { if (event.target === cy) cy.elements().removeClass("faded path"); });
  cy.on("dbltap", "node", (event) => { window.location.href = event.target.data("url"); });
  // A label shows a long name's end; the whole name is the tooltip (and the side panel's title).
  cy.on("mouseover", "node", (event) => { box.title = event.target.data("name") || event.target.data("label"); });
  cy.on("mouseout", "node", () => { box.title = ""; });
  measureDrawn("lotline:graph", "lotline:graph:response");
  box.dataset.ready = String(cy.nodes().length);
  box.dataset.labelPx = (cy.zoom() * LABEL_FONT_PX).toFixed(1);  // what a reader sees
  return cy;
}

// The view a graph opens with: ``nodes`` fitted when their labels are then readable, else readable
// on ``focus``. Fitted on the nodes' boxes, which hold their labels: measuring every label, as
// cy.fit() does, cost a quarter of a 500-node graph's drawing.
const FIT_PADDING_PX = 30;

function openView(cy, nodes, focus) {
  const box = nodes.boundingBox({ includeLabels: false, includeOverlays: false });
  const fitted = Math.min(
    cy.maxZoom(),
    (cy.width() - 2 * FIT_PADDING_PX) / Math.max(box.w, 1),
    (cy.height() - 2 * FIT_PADDING_PX) / Math.max(box.h, 1),
  );
  if (fitted < READABLE_ZOOM) {  // too small to read when fitted: open readable, on the node asked for
    cy.zoom(READABLE_ZOOM);
    cy.center(focus);
    cy.pan(intoView(cy, box));
    return;
  }
  const pan = { x: (cy.width() - fitted * (box.x1 + box.x2)) / 2, y: (cy.height() - fitted * (box.y1 + box.y2)) / 2 };
  cy.viewport({ zoom: fitted, pan });
}

// A pan that leaves no empty band on a side while the graph runs off the opposite side: the
// graph is moved in by the smaller of the two (the node centred stays on screen).
function intoView(cy, box) {
  const pan = { ...cy.pan() }, zoom = cy.zoom();
  for (const [axis, size, low, high] of [["x", cy.width(), box.x1, box.x2], ["y", cy.height(), box.y1, box.y2]]) {
    const start = low * zoom + pan[axis] - FIT_PADDING_PX, end = high * zoom + pan[axis] + FIT_PADDING_PX;
    if (start < 0 && end < size) pan[axis] += Math.min(size - end, -start);
    if (end > size && start > 0) pan[axis] -= Math.min(start, end - size);
  }
  return pan;
}

function highlight(cy, node, box) {
  const path = node.predecessors().union(node.successors()).union(node);
  cy.elements().addClass("faded").removeClass("path");
  path.removeClass("faded").addClass("path");
  if (box.dataset.details) {
    htmx.ajax("GET", box.dataset.details + "?node=" + encodeURIComponent(node.id()), { target: "#node-details" });
  }
  const selected = document.getElementById("graph-selected");
  if (selected) {
    selected.textContent = "";
    const link = document.createElement("a");
    link.href = node.data("url");
    link.textContent = "open " + (node.data("name") || node.data("label").replace("\n", " "));
    selected.appendChild(link);
  }
}

// What of a large graph is shown: every node, or only the focus's upstream or downstream
// (?dir=up|down, kept in the URL), less the branches of collapsed nodes. A collapsed node hides
// what lies beyond it as seen from the focus (what is no longer connected to the focus without
// it) and says how many it hides; expanding shows them again.
function graphView(cy, box) {
  const focus = cy.getElementById(box.dataset.focus).nonempty() ? cy.getElementById(box.dataset.focus) : cy.nodes()[0];
  const collapsed = new Set();
  let direction = new URLSearchParams(window.location.search).get("dir") || "both";
  let selected = null;
  const button = document.getElementById("graph-collapse");
  const chooser = document.getElementById("graph-direction");

  const connected = (nodes, without) => {  // nodes of ``nodes`` reachable from the focus, not through ``without``
    const seen = new Set([focus.id()]);
    const queue = [focus];
    while (queue.length) {
      const node = queue.pop();
      node.neighborhood("node").forEach((next) => {
        if (next.id() !== without && nodes.has(next.id()) && !seen.has(next.id())) {
          seen.add(next.id());
          queue.push(next);
        }
      });
    }
    return seen;
  };

  const apply = () => {
    let scope = cy.nodes();
    if (direction === "up") scope = focus.predecessors("node").union(focus);
    if (direction === "down") scope = focus.successors("node").union(focus);
    let shown = new Set(scope.map((n) => n.id()));
    for (const id of collapsed) {
      const node = cy.getElementById(id);
      node.data("hides", 0);
      if (!shown.has(id) || id === focus.id()) continue;
      const kept = connected(shown, id);
      kept.add(id);
      node.data("hides", shown.size - kept.size);
      shown = kept;
    }
    cy.batch(() => {  // only what changes: a style pass over every node costs as much as the layout
      cy.nodes().forEach((n) => {
        const hidden = !shown.has(n.id()), folded = collapsed.has(n.id());
        if (Boolean(n.scratch("hidden")) !== hidden) {
          n.scratch("hidden", hidden);
          n.style("display", hidden ? "none" : "element");
        }
        if (n.hasClass("collapsed") !== folded) n.toggleClass("collapsed", folded);
        const label = folded && n.data("hides") ? `${n.data("label")}\n(+${n.data("hides")} hidden)` : undefined;
        if (n.data("shown") !== label) {
          // set as the node's own label, not mapped from data(): a mapped label kept the size of the
          // one it replaced, which cut "(+480 hidden)" to a few letters
          if (label === undefined) {
            n.removeData("shown");
            n.removeStyle("label");
          } else {
            n.data("shown", label);
            n.style("label", label);
          }
        }
      });
    });
    box.dataset.visible = String(shown.size);
    box.dataset.direction = direction;
    refreshButton();
    drawMinimap(cy, box);
  };

  // A side of the graph is laid out again on its own and fitted: in the whole graph's places its
  // nodes lay far apart, each amid nodes now hidden, and the chain asked for ran off the screen.
  const layOut = () => {
    const shown = cy.elements(":visible");
    shown.layout(graphLayout(shown.jsons())).run();
    openView(cy, shown.nodes(), focus);
    drawMinimap(cy, box);
  };

  const refreshButton = () => {
    if (!button) return;
    const usable = selected && selected.id() !== focus.id() && !selected.scratch("hidden");
    button.disabled = !usable;
    button.textContent = usable && collapsed.has(selected.id()) ? "expand" : "collapse";
    button.title = usable ? "" : "Click a node other than the one the graph is about, then collapse what lies beyond it.";
  };

  cy.on("tap", "node", (event) => { selected = event.target; refreshButton(); });
  if (button) button.addEventListener("click", () => {
    if (!selected) return;
    if (collapsed.has(selected.id())) collapsed.delete(selected.id()); else collapsed.add(selected.id());
    apply();
  });
  if (chooser) {
    chooser.value = direction;
    chooser.addEventListener("change", () => {
      direction = chooser.value;
      const url = new URL(window.location.href);
      if (direction === "both") url.searchParams.delete("dir"); else url.searchParams.set("dir", direction);
      history.replaceState(null, "", url);  // a shared link opens the same view
      apply();
      layOut();
    });
  }
  apply();
  if (direction !== "both") layOut();
}

// An overview of the whole graph in a corner: every shown node as a dot, the part on screen as a
// frame; a click or drag on it moves the view there.
function drawMinimap(cy, box) {
  let map = box.querySelector("canvas.minimap");
  if (!map) {
    map = document.createElement("canvas");
    map.className = "minimap";
    map.width = 180;
    map.height = 120;
    map.setAttribute("aria-label", "overview of the graph: click to move there");
    box.appendChild(map);
    const move = (event) => {
      const at = map._toModel;
      if (!at) return;
      const rect = map.getBoundingClientRect();
      const x = at.x0 + (event.clientX - rect.left - at.dx) / at.scale;
      const y = at.y0 + (event.clientY - rect.top - at.dy) / at.scale;
      cy.pan({ x: cy.width() / 2 - x * cy.zoom(), y: cy.height() / 2 - y * cy.zoom() });
    };
    map.addEventListener("mousedown", (event) => { event.stopPropagation(); map._dragging = true; move(event); });
    map.addEventListener("mousemove", (event) => { if (map._dragging) move(event); });
    window.addEventListener("mouseup", () => { map._dragging = false; });
    let queued = false;
    cy.on("viewport", () => {
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => { queued = false; drawMinimap(cy, box); });
    });
  }
  const shown = cy.nodes(":visible");
  const bounds = shown.boundingBox();
  const view = cy.extent();
  const x0 = Math.min(bounds.x1, view.x1), y0 = Math.min(bounds.y1, view.y1);
  const x1 = Math.max(bounds.x2, view.x2), y1 = Math.max(bounds.y2, view.y2);
  const scale = Math.min((map.width - 8) / Math.max(x1 - x0, 1), (map.height - 8) / Math.max(y1 - y0, 1));
  const dx = 4, dy = 4;
  map._toModel = { x0, y0, scale, dx, dy };
  const draw = map.getContext("2d");
  draw.clearRect(0, 0, map.width, map.height);
  shown.forEach((n) => {
    const p = n.position();
    draw.fillStyle = STATE_COLOURS[n.data("state")] || "#a0aec0";
    draw.fillRect(dx + (p.x - x0) * scale - 2, dy + (p.y - y0) * scale - 1.5, 4, 3);
  });
  draw.strokeStyle = "#d69e2e";
  draw.lineWidth = 1.5;
  draw.strokeRect(dx + (view.x1 - x0) * scale, dy + (view.y1 - y0) * scale, view.w * scale, view.h * scale);
  map.dataset.nodes = String(shown.length);
}

function setUpGraph() {
  const box = document.getElementById("graph");
  if (!box) return;
  if (!cytoscape("layout", "dagre")) cytoscape.use(cytoscapeDagre);  // the script registers itself
  drawGraph(box).then((cy) => {
    if (!cy) return;
    window.lotlineGraph = cy;
    graphView(cy, box);
    const fit = document.getElementById("graph-fit");
    if (fit) fit.addEventListener("click", () => cy.fit(cy.nodes(":visible"), 20));
    const find = document.getElementById("graph-find");
    if (find) find.addEventListener("input", () => {
      const wanted = find.value.trim().toLowerCase();
      cy.nodes().removeClass("found");
      if (!wanted) return;
      const found = cy.nodes().filter((n) => (n.data("name") || n.data("label")).toLowerCase().includes(wanted));
      found.addClass("found");
      if (found.nonempty()) cy.center(found[0]);
    });
  }).catch((error) => { box.textContent = String(error); });
}

// A part of a page that fails to load says so where it would have been, never silently keeps the
// old content: the server's error page (a fragment: status and message) is swapped in like a
// success, and a request that never got an answer leaves a message in its target.
function setUpPartialErrors() {
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    const xhr = event.detail.xhr;
    if (xhr.status < 400) return;
    event.detail.isError = false;
    // lotline's own error page is HTML that names status and message; anything else (a proxy's
    // plain-text 502) would read as bare text: it is said with its status instead
    const html = (xhr.getResponseHeader("Content-Type") || "").includes("text/html");
    event.detail.shouldSwap = html;
    if (!html && event.detail.target) showFailure(event.detail.target, failureText(xhr.status, xhr.responseText));
  });
  document.body.addEventListener("htmx:sendError", (event) => {
    if (event.detail.target) showFailure(event.detail.target, "Could not reach the server: this part was not loaded. Try again.");
  });
}

// What an answer that is not lotline's own says: "the server failed (502): <its text>".
function failureText(status, text) {
  let said = (text || "").trim();
  try { said = JSON.parse(said).message || said; } catch (error) { /* plain text, as it is */ }
  const what = status >= 500 ? "the server failed" : "the server refused the request";
  return `${what} (${status}): ${said.slice(0, 300) || "no message"}`;
}

function showFailure(target, text) {
  target.textContent = "";
  const message = document.createElement("p");
  message.className = "error message partial-error";
  message.setAttribute("role", "alert");
  message.textContent = text;
  target.appendChild(message);
}

// Filters live in the URL: a filter that htmx applied is pushed to the history as the page's own
// URL, so Back and a shared link show the same list; Back re-renders the page from its URL.
function setUpFilterHistory() {
  // before the swap: the form that asked is still in the page (the list it swaps in holds a new one)
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    const form = (event.detail.requestConfig || {}).elt || event.detail.elt;  // the element that asked
    if (event.detail.xhr.status >= 400 || !form.matches || !form.matches("form[data-page]")) return;
    const wanted = new URLSearchParams();
    for (const [key, value] of new FormData(form)) if (value) wanted.append(key, value);
    const shown = wanted.toString();
    const url = form.dataset.page + (shown ? "?" + shown : "");
    if (url !== window.location.pathname + window.location.search) history.pushState({ filter: true }, "", url);
  });
  window.addEventListener("popstate", () => window.location.reload());
}

// Pages with lot state follow the lot event log (GET /api/v1/lots/events): when an event of the
// namespace arrives, each part marked data-live is fetched again and swapped in, without a reload.
const LIVE_POLL_MS = 3000;

function setUpLive() {
  const body = document.body;
  if (!body.dataset.eventsAfter || !document.querySelector("[data-live][id]")) return;
  let after = Number(body.dataset.eventsAfter);
  // A hold or a release is no lot event: the namespace's held jobs are asked for with each poll.
  const heldNow = async () => {
    const answer = await fetch("/lots/holds?" + new URLSearchParams({ ns: body.dataset.ns }));
    return answer.ok ? (await answer.json()).held.join(",") : body.dataset.holds;
  };
  const poll = async () => {
    try {
      const query = new URLSearchParams({ after: String(after), limit: "1000" });
      const answer = await fetch("/api/v1/lots/events?" + query, { headers: { Accept: "application/json" } });
      const holds = await heldNow();
      const found = answer.ok ? await answer.json() : { events: [] };
      if (found.events.length || holds !== body.dataset.holds) {
        if (found.events.length) after = found.lastPosition;
        body.dataset.holds = holds;
        for (const part of document.querySelectorAll("[data-live][id]")) {
          const id = "#" + part.id;
          const source = part.dataset.liveSrc || window.location.href;  // a part from another page
          await htmx.ajax("GET", source, { target: id, select: id, swap: "outerHTML" });
        }
        tabStopOfGrid();
        enableActions();
        body.dataset.refreshed = String(after);
      }
    } catch (error) {
      // the next poll tries again; a page that cannot reach the server says so when it acts
    }
    setTimeout(poll, LIVE_POLL_MS);
  };
  setTimeout(poll, LIVE_POLL_MS);
}

// The grid's range backfill: a dry run first, shown as what it would do; then the same for real.
// A time typed without a zone is UTC, as every time the pages show is (and as the server reads forms).
function utcText(value) {
  const typed = value.trim();
  return /^\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d(:\d\d(\.\d+)?)?$/.test(typed) ? typed.replace(" ", "T") + "Z" : typed;
}

// An instant as the pages show times: ``2023-01-01 04:10:00`` (UTC).
function shownTime(iso) {
  return new Date(iso).toISOString().slice(0, 19).replace("T", " ");
}

function backfillRange(form) {
  return { from: utcText(form.elements["backfill-from"].value), to: utcText(form.elements["backfill-to"].value) };
}

function backfillUrl(form, dry) {
  const query = new URLSearchParams(backfillRange(form));
  const only = form.elements["only"].value;  // empty: every lot of the range
  if (only) query.set("only", only);
  if (dry) query.set("dryRun", "true");
  return form.dataset.url + "?" + query;
}

function lotCount(runs) {
  return runs.reduce((sum, run) => sum + run.count, 0);
}

async function runBackfill(button) {
  const form = button.closest("form");
  const plan = document.getElementById("backfill-plan");
  const dry = button.dataset.backfill === "preview";
  const headers = { "Content-Type": "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const answer = await fetch(backfillUrl(form, dry), { method: "POST", headers }).catch(() => null);
  const body = answer ? await answer.json().catch(() => ({})) : {};
  if (!answer || !answer.ok) {
    plan.textContent = `backfill: ${answer ? refusal(answer, body) : "could not reach the server"}`;
    return;
  }
  const reopened = lotCount(body.reopened), hinted = lotCount(body.hinted) + lotCount(body.unhinted);
  const left = lotCount(body.left);
  plan.textContent = `${dry ? "Would reopen" : "Reopened"} ${reopened} complete lots (and ${body.cascaded} downstream), `
    + `${dry ? "would queue" : "queued"} ${hinted} missing or failed lots; ${left} left (blocked, held or running).`;
  plan.dataset.reopened = String(reopened);
  plan.dataset.cascaded = String(body.cascaded);
  plan.dataset.queued = String(hinted);
  form.querySelector("[data-backfill=run]").disabled = !dry;
  if (!dry) {
    toast("backfill: done", false);
    const runs = [...body.reopened, ...body.hinted, ...body.unhinted];
    if (runs.length) await showBackfillProgress(form, runs);  // else the plan says it took no lot
  }
}

// After a backfill, its progress: its runs of lots by the state each lot is in now, refreshed
// from the lot event log like the grid (a part with data-live-src is fetched from there).
const MAX_PROGRESS_RUNS = 200;

async function showBackfillProgress(form, runs) {
  const query = new URLSearchParams(backfillRange(form));
  if (runs.length <= MAX_PROGRESS_RUNS) for (const run of runs) query.append("lots", `${run.from}~${run.to}`);
  const url = form.dataset.progress + "?" + query;
  const box = document.getElementById("backfill-progress");
  await htmx.ajax("GET", url, { target: "#backfill-progress" });
  const link = document.createElement("a");
  link.href = url;
  link.id = "backfill-progress-link";
  link.textContent = "open the progress as a page";
  box.appendChild(link);
}

// Dragging across the grid chooses a range: the cells from where the drag began to where it
// ends (in time order) are marked, and the backfill dialog opens over their window.
function setUpRangeDrag() {
  const grid = document.getElementById("grid");
  const form = document.getElementById("backfill-form");
  if (!grid || !form) return;
  let anchor = null, current = null;
  const cells = () => Array.from(document.querySelectorAll("#grid a.c[data-from]"));
  const chosen = () => {
    const all = cells();
    const [a, b] = [all.indexOf(anchor), all.indexOf(current)].sort((x, y) => x - y);
    return all.slice(a, b + 1);
  };
  const mark = () => {
    const picked = new Set(chosen());
    cells().forEach((c) => c.classList.toggle("in-range", picked.has(c)));
  };
  document.addEventListener("mousedown", (event) => {
    const cell = event.button === 0 && event.target.closest("#grid a.c[data-from]");
    if (!cell) return;
    event.preventDefault();  // no link drag, no text selection
    anchor = current = cell;
  });
  document.addEventListener("mouseover", (event) => {
    const cell = anchor && event.target.closest("#grid a.c[data-from]");
    if (cell && cell !== current) { current = cell; mark(); }
  });
  document.addEventListener("mouseup", () => {
    if (!anchor) return;
    const picked = anchor === current ? [] : chosen();
    anchor = current = null;
    if (!picked.length) return;  // a click: the cell opens as before
    form.elements["backfill-from"].value = shownTime(picked[0].dataset.from);
    form.elements["backfill-to"].value = shownTime(picked[picked.length - 1].dataset.to);
    form.querySelector("[data-backfill=run]").disabled = true;  // a new range: preview it first
    document.getElementById("backfill-plan").textContent = `${picked.length} cells chosen: preview what a backfill would do.`;
    const dialog = document.getElementById("backfill");
    dialog.open = true;
    dialog.scrollIntoView({ block: "nearest" });
    const ready = document.body.dataset.auth !== "required" || sessionStorage.getItem(TOKEN_KEY);
    if (ready) runBackfill(form.querySelector("[data-backfill=preview]"));
  });
  form.addEventListener("input", () => { form.querySelector("[data-backfill=run]").disabled = true; });
}

function setUpBackfill() {
  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-backfill]");
    if (button) runBackfill(button);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  measureDrawn("lotline:page", "responseEnd");
  setUpPartialErrors();
  setUpBackfill();
  setUpRangeDrag();
  setUpFilterHistory();
  setUpLive();
  setUpToken();
  enableActions();
  document.body.addEventListener("htmx:afterSwap", enableActions);  // a lot panel's buttons
  setUpClicks();
  setUpGrid();
  setUpMatrix();
  setUpGraph();
});

// A wide matrix (a year of days) opens where it matters: its latest trouble (the last cell not
// done), else its newest columns — not on the quiet start of its range.
function setUpMatrix() {
  const wrap = document.getElementById("matrix-wrap");
  if (!wrap || wrap.scrollWidth <= wrap.clientWidth) return;
  const trouble = Array.from(wrap.querySelectorAll("a.c[data-state]")).filter(
    (c) => !["complete", "empty", "pending"].includes(c.dataset.state),
  );
  const left = (c) => c.getBoundingClientRect().left - wrap.getBoundingClientRect().left + wrap.scrollLeft;
  const cell = trouble.reduce((latest, c) => (!latest || left(c) > left(latest) ? c : latest), null);
  wrap.scrollLeft = cell ? left(cell) - wrap.clientWidth / 2 : wrap.scrollWidth;
  wrap.dataset.opened = cell ? cell.dataset.from : "end";
}
