// Buyer pages: place an order (params form generated from GET /v1/learners) and follow
// one order to its model. Admins see the order page too, without the model.
"use strict";

// One sentence per guarantee label (docs/guarantees.md says what each promises).
const GUARANTEES = {
  conditional_on_allocation:
    "The released model is ε_i-differentially private for each seller's data given the " +
    "allocation; the allocation itself was computed from the sellers' data, so the pair " +
    "(allocation, model) is not covered.",
  end_to_end:
    "The whole output is ε_i-differentially private for each seller: the allocation saw " +
    "only costs and public data.",
  local:
    "Each record was randomized on its own with its seller's ε_i before the learner used " +
    "it, and the model is post-processing; the platform still holds the raw records.",
  user_level_local:
    "Each seller's records were randomized together with that seller's ε_i before the " +
    "learner used them; the platform still holds the raw records.",
  mpc_plus_dp:
    "The model was computed in secure multi-party computation and released with " +
    "differential-privacy noise.",
};

// Plain-language labels of the learners' parameters; the technical name is the hint.
const PARAM_LABELS = {
  fit_intercept: "Fit an intercept",
  algorithm: "Algorithm",
  gamma: "Step size constant",
  alpha_radius: "Bound on the missingness model",
  alpha: "Quantile level",
  interval: "Response interval",
  scale: "Working scale",
  private_x: "Also protect the features",
  backend: "Computation backend",
  imputation: "Records with missing values",
  sparsity: "Features to select",
  selector: "How each seller selects features",
  k_sel: "Features each seller proposes",
  n_bins: "Histogram bins",
  bound: "Coefficient range",
  hh_alpha: "Heavy-hitter pruning share",
  batch_size: "Sellers per gradient step",
  gradient_bound: "Gradient range",
};

PM.paramLabel = (name) =>
  PARAM_LABELS[name] || name.replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase());

// A parameter's description for people: no references to specification sections.
PM.plainDoc = (doc) =>
  String(doc || "")
    .replace(/\s*\((?:spec|see)[^)]*§[^)]*\)/gi, "")
    .replace(/\s*\(spec default\)/gi, " (the default)")
    .replace(/\s*§\s*[\d.]+/g, "")
    .replace(/\bnull\b/g, "empty")
    .trim();

function boundsText(spec) {
  return [
    spec.minimum !== undefined ? `≥ ${spec.minimum}` : null,
    spec.exclusiveMinimum !== undefined ? `> ${spec.exclusiveMinimum}` : null,
    spec.maximum !== undefined ? `≤ ${spec.maximum}` : null,
    spec.exclusiveMaximum !== undefined ? `< ${spec.exclusiveMaximum}` : null,
  ].filter(Boolean);
}

function numberInput(attrs, spec, value, { required, placeholder } = {}) {
  return PM.el("input", {
    ...attrs,
    type: "number",
    step: spec.type === "int" ? "1" : "any",
    min: spec.minimum ?? spec.exclusiveMinimum,
    max: spec.maximum ?? spec.exclusiveMaximum,
    value: value === null || value === undefined ? null : value,
    required: Boolean(required),
    placeholder,
  });
}

// What an empty optional field means, from the doc's "null: ..." sentence.
function nullMeaning(spec) {
  return /null:/.test(spec.doc || "") ? "empty (see below)" : "empty: automatic";
}

function paramInput(name, spec) {
  const id = `param-${name}`;
  const attrs = { id, name, "data-param": name, "data-type": spec.type, "data-nullable": spec.nullable ? "1" : null };
  let input;
  if (spec.type === "bool") {
    input = PM.el("input", { ...attrs, type: "checkbox", checked: Boolean(spec.default) });
  } else if (spec.type === "choice") {
    input = PM.el("select", attrs, (spec.choices || []).map((c) => PM.el("option", { value: c, selected: c === spec.default }, c)));
  } else if (spec.type === "interval") {
    const [low, high] = Array.isArray(spec.default) ? spec.default : [null, null];
    const placeholder = spec.nullable ? nullMeaning(spec) : undefined;
    const half = (which, value) =>
      PM.el("input", {
        id: `${id}-${which}`,
        "aria-label": `${PM.paramLabel(name)}: ${which}`,
        type: "number",
        step: "any",
        value,
        required: !spec.nullable,
        placeholder: which === "low" ? placeholder : undefined,
      });
    input = PM.el("span", { ...attrs, class: "interval" }, half("low", low), " to ", half("high", high));
  } else {
    const nullable = spec.nullable || spec.default === null;
    input = numberInput(attrs, spec, spec.default, {
      required: !nullable,
      placeholder: nullable ? nullMeaning(spec) : undefined,
    });
  }
  const bounds = boundsText(spec);
  const shown = spec.default === null || spec.default === undefined ? "empty" : Array.isArray(spec.default) ? spec.default.join(" to ") : spec.default;
  const hint = `${PM.plainDoc(spec.doc)}${bounds.length ? " (" + bounds.join(", ") + ")" : ""}; default ${shown}.`;
  return PM.el(
    "div",
    { class: "param" },
    PM.el("label", { for: spec.type === "interval" ? `${id}-low` : id }, PM.paramLabel(name), PM.el("code", { class: "tech" }, name)),
    input,
    PM.el("span", { class: "hint" }, hint),
  );
}

// The form's parameters as the API wants them; an empty optional field is null.
PM.readParams = function () {
  const params = {};
  for (const input of document.querySelectorAll("[data-param]")) {
    const name = input.dataset.param;
    const type = input.dataset.type;
    if (type === "bool") params[name] = input.checked;
    else if (type === "choice") params[name] = input.value;
    else if (type === "interval") {
      const low = PM.byId(`param-${name}-low`).value.trim();
      const high = PM.byId(`param-${name}-high`).value.trim();
      if (!low && !high) params[name] = null;
      else if (!low || !high) throw new Error(`${PM.paramLabel(name)} (${name}): give both ends, or neither`);
      else params[name] = [Number(low), Number(high)];
    } else if (input.value.trim() === "") {
      if (input.dataset.nullable || !input.required) params[name] = null;
    } else params[name] = type === "int" ? parseInt(input.value, 10) : Number(input.value);
  }
  return params;
};

PM.pages.buy = async function () {
  const markets = await PM.api("/v1/markets?limit=100");
  const marketSelect = PM.byId("market");
  const learnerSelect = PM.byId("learner");
  const wanted = new URLSearchParams(window.location.search).get("market");
  marketSelect.replaceChildren(
    ...markets.items.map((m) => PM.el("option", { value: m.id, selected: String(m.id) === wanted }, `#${m.id} ${m.name} (${m.task})`)),
  );
  const byId = new Map(markets.items.map((m) => [String(m.id), m]));
  let learners = [];
  const showParams = () => {
    const learner = learners.find((l) => l.name === learnerSelect.value);
    const box = PM.byId("params");
    box.replaceChildren(PM.el("legend", {}, "Learner parameters (the defaults work)"));
    PM.byId("learner-summary").textContent = learner ? `${PM.plainDoc(learner.summary)} · privacy model: ${learner.privacy_model}` : "";
    if (!learner) return;
    const entries = Object.entries(learner.params);
    if (!entries.length) box.append(PM.el("p", { class: "hint" }, "This learner has no parameters."));
    for (const [name, spec] of entries) box.append(paramInput(name, spec));
  };
  const showLearners = async () => {
    const market = byId.get(marketSelect.value);
    learnerSelect.replaceChildren();
    if (!market) return showParams();
    // Only the learners this market can take (its task, partition, missing values).
    learners = (await PM.api(`/v1/learners?market_id=${market.id}`)).items;
    learnerSelect.replaceChildren(...learners.map((l) => PM.el("option", { value: l.name }, l.name)));
    PM.byId("gamma").value = market.mechanism.gamma;
    const canChoose = market.validation_size > 0 && market.partition !== "vertical";
    PM.byId("gamma-budget").disabled = !canChoose;
    PM.byId("gamma-budget-note").textContent = canChoose
      ? "Slower: it tries several γ on the market's public validation set."
      : "Not on this market: it needs a public validation set (and a horizontal market).";
    if (!canChoose) PM.byId("gamma-fixed").checked = true;
    PM.byId("gamma").disabled = !PM.byId("gamma-fixed").checked;
    showParams();
  };
  marketSelect.addEventListener("change", showLearners);
  learnerSelect.addEventListener("change", showParams);
  await showLearners();
  for (const radio of document.querySelectorAll("[name=gamma-mode]")) {
    radio.addEventListener("change", () => {
      PM.byId("gamma").disabled = !PM.byId("gamma-fixed").checked;
    });
  }
  PM.byId("order-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    PM.clearMessage();
    let params;
    try {
      params = PM.readParams();
    } catch (err) {
      return PM.say(`Check the form: ${err.message}.`);
    }
    const body = {
      learner: learnerSelect.value,
      budget: Number(PM.byId("budget").value),
      gamma: PM.byId("gamma-fixed").checked ? Number(PM.byId("gamma").value) : null,
      params,
    };
    try {
      const order = await PM.api(`/v1/markets/${marketSelect.value}/orders`, { method: "POST", body });
      window.location.assign(`/console/orders/${order.id}`);
    } catch (err) {
      PM.say(err instanceof PM.ApiError && err.status === 422 ? `The order was refused: ${err.message}` : PM.explain(err, "the order"));
    }
  });
  const mine = await PM.api("/v1/orders?limit=100");
  PM.fillTable(
    PM.byId("orders"),
    mine.items.map((o) => [
      PM.link(`/console/orders/${o.id}`, `#${o.id}`),
      byId.has(String(o.market_id)) ? `${byId.get(String(o.market_id)).name} (#${o.market_id})` : `#${o.market_id}`,
      o.status,
      o.learner,
      PM.money(o.budget),
      PM.money(o.summary ? o.summary.total_paid : null),
    ]),
    "You have not ordered anything yet.",
  );
};

function showModel(model) {
  const privacy = model.privacy;
  PM.byId("guarantee").textContent = privacy.guarantee;
  let text = GUARANTEES[privacy.guarantee] || "See the guarantees guide for this label.";
  if (privacy.custody === "seller") {
    // The records never left their sellers: the randomizer ran on the sellers' machines.
    text = text.replace(/; the platform still holds the raw records\./, "; the records stayed with their sellers, who ran the randomizer on their own machines.");
  }
  PM.byId("guarantee-text").textContent = text;
  const eps = privacy.epsilon;
  PM.byId("privacy-summary").textContent =
    `${privacy.sellers_used} sellers used; ε per seller min ${PM.fmt(eps.min)}, ` +
    `median ${PM.fmt(eps.median)}, max ${PM.fmt(eps.max)}.`;
  const pay = model.payments;
  PM.charts.meters(PM.byId("payments"), [
    { label: "paid / budget", value: pay.total, max: pay.budget, text: `${PM.money(pay.total)} of ${PM.money(pay.budget)}` },
  ], { title: "payments vs budget" });
  PM.dl(PM.byId("metrics"), Object.entries(model.metrics).map(([k, v]) => [k, PM.fmt(v)]));
  PM.byId("model-input").textContent = model.input ? `Input: ${model.input}.` : "";
  const names = model.feature_names || (model.coefficients || []).map((_, i) => `x${i}`);
  const rows = names.map((name, i) => [name, PM.fmt((model.coefficients || [])[i], 6)]);
  if (model.intercept !== null && model.intercept !== undefined) rows.push(["(intercept)", PM.fmt(model.intercept, 6)]);
  PM.fillTable(PM.byId("coefficients"), rows, "No coefficients.");
  PM.byId("model").hidden = false;
}

// The order's aggregates (api.md: what a buyer may see), for its buyer and admins.
function showSummary(order) {
  const s = order.summary || {};
  const eps = s.epsilon || {};
  PM.dl(PM.byId("summary"), [
    ["γ", `${PM.fmt(s.gamma)} (${s.gamma_source === "chosen" ? "chosen for the budget" : "as ordered"})`],
    ["total paid / budget", `${PM.money(s.total_paid)} / ${PM.money(order.budget)}`],
    ["sellers used", `${s.sellers_used ?? "—"}`],
    ["ε min / median / max", `${PM.fmt(eps.min)} / ${PM.fmt(eps.median)} / ${PM.fmt(eps.max)}`],
    ["validation error", PM.fmt(s.validation_error)],
  ].concat(s.gamma_note ? [["why budget is left", s.gamma_note]] : []));
  PM.byId("summary-box").hidden = false;
}

// Order stages in words (the API's stage ids are shown as hints).
const STAGES = {
  queued: "Waiting in the queue",
  loading: "Loading the offers",
  choosing_gamma: "Choosing γ for your budget",
  allocating: "Choosing each seller's ε",
  payments: "Computing the sellers' payments",
  payments_uncertified: "Computing the sellers' payments (the allocation is not certified optimal)",
  collecting: "Collecting the sellers' reports",
  releasing: "Training and releasing the model",
  settling: "Settling payments",
  done: "Done",
  failed: "Failed",
  cancelled: "Cancelled",
};
PM.stageWords = (stage) => STAGES[stage] || String(stage).replace(/_/g, " ");

const FINISHED = ["succeeded", "failed", "cancelled"];

function elapsedText(since) {
  const seconds = Math.max(0, Math.round((Date.now() - since) / 1000));
  const m = Math.floor(seconds / 60);
  return m ? `${m} min ${seconds % 60} s` : `${seconds} s`;
}

// Rough time left in the current stage. A stage reports only its own fraction done, so
// the estimate assumes the fraction keeps growing at the rate this page has seen since
// it first saw the stage (fraction f0 at time t0; f now): left = (1 − f)·(now − t0)/(f − f0).
// No estimate before the stage has moved for a second, nor for stages whose length is
// not the service's to predict (the queue, collecting the sellers' reports).
const NO_ESTIMATE = ["queued", "collecting", "done", "failed", "cancelled"];
PM.stageSecondsLeft = function (seen, now, fraction) {
  if (!seen || NO_ESTIMATE.includes(seen.stage)) return null;
  const dt = (now - seen.t0) / 1000;
  const df = fraction - seen.f0;
  if (!(dt >= 1 && df > 0) || fraction >= 1) return null;
  return ((1 - fraction) * dt) / df;
};

PM.leftText = function (seconds) {
  if (seconds === null) return "";
  if (seconds < 90) return `about ${Math.max(1, Math.round(seconds))} s left in this stage`;
  return `about ${Math.round(seconds / 60)} min left in this stage`;
};

function downloadJson(filename, value) {
  downloadBlob(filename, new Blob([JSON.stringify(value, null, 2)], { type: "application/json" }));
}

function downloadBlob(filename, blob) {
  const url = URL.createObjectURL(blob);
  const a = PM.el("a", { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// Seller-custody orders: the round being collected, its deadline, reports received/expected.
async function showCollection(orderId) {
  const c = await PM.api(`/v1/orders/${orderId}/collection`);
  const box = PM.byId("collection");
  box.textContent =
    `Collecting round ${c.round}: ${c.round_reports_received} of ${c.round_reports_expected} ` +
    `reports received (deadline ${c.deadline}); ${c.reports_received} of ${c.reports_expected} in all.`;
  box.hidden = false;
}

PM.pages.order = async function (data) {
  const orderId = Number(data.orderId);
  const first = await PM.load(`/v1/orders/${orderId}`, `order ${orderId}`);
  let marketName = `#${first.market_id}`;
  try {
    const market = await PM.api(`/v1/markets/${first.market_id}`);
    marketName = `${market.name} (#${market.id})`;
  } catch (err) {
    // the order's facts still show; the market's name is a nicety
  }
  PM.dl(PM.byId("order-facts"), [
    ["market", marketName],
    ["learner", first.learner],
    ["budget", PM.money(first.budget)],
    ["γ", first.gamma === null ? "chosen for the budget" : PM.fmt(first.gamma)],
    ["placed", new Date(first.created_at).toLocaleString()],
  ]);
  const since = Date.parse(first.created_at);
  const cancel = PM.byId("cancel-order");
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try {
      const o = await PM.api(`/v1/orders/${orderId}:cancel`, { method: "POST" });
      PM.say(
        o.status === "cancelled"
          ? "The order was cancelled; nothing was charged."
          : "Cancelling: the order stops at the end of its current stage; nothing will be charged.",
        "info",
      );
    } catch (err) {
      cancel.disabled = false;
      PM.say(PM.explain(err, "the order"));
    }
  });
  const stages = [];
  let seen = null; // {stage, t0, f0}: when this page first saw the current stage
  const order = await PM.poll(
    () => PM.load(`/v1/orders/${orderId}`, `order ${orderId}`),
    (o) => {
      const done = FINISHED.includes(o.status);
      PM.byId("order-status").textContent = o.status;
      PM.byId("order-stage").textContent = PM.stageWords(o.progress.stage);
      PM.byId("order-stage").title = o.progress.stage;
      PM.byId("order-progress").value = o.progress.fraction;
      PM.byId("order-percent").textContent = `${Math.round(o.progress.fraction * 100)} %`;
      if (!done) PM.byId("order-elapsed").textContent = `${elapsedText(since)} since it was placed`;
      const now = Date.now();
      if (!seen || seen.stage !== o.progress.stage) seen = { stage: o.progress.stage, t0: now, f0: o.progress.fraction };
      PM.byId("order-left").textContent = done ? "" : PM.leftText(PM.stageSecondsLeft(seen, now, o.progress.fraction));
      cancel.hidden = done;
      if (stages[stages.length - 1] !== o.progress.stage) {
        stages.push(o.progress.stage);
        PM.byId("stages").append(PM.el("li", { title: o.progress.stage }, PM.stageWords(o.progress.stage)));
      }
      if (o.progress.stage === "collecting") showCollection(orderId);
      return done;
    },
    { interval: 300 },
  );
  if (order.status !== "succeeded") {
    const box = PM.byId("order-error");
    box.textContent =
      order.status === "cancelled"
        ? `The order was cancelled; nothing was charged and no seller was paid. ${order.error || ""}`.trim()
        : `The order failed: ${order.error || "no reason was recorded"}`;
    box.hidden = false;
    return;
  }
  showSummary(order);
  if (PM.me.role === "admin") {
    const links = PM.byId("admin-links");
    links.replaceChildren(PM.link(`/console/orders/${orderId}/allocations`, "Per-seller allocation of this order"));
    links.hidden = false;
    return;
  }
  const model = await PM.api(`/v1/orders/${orderId}/model`);
  showModel(model);
  const download = PM.byId("download-model");
  download.hidden = false;
  download.addEventListener("click", () => downloadJson(`privmarket-order-${orderId}-model.json`, model));
  const onnx = PM.byId("download-onnx");
  onnx.hidden = false;
  onnx.addEventListener("click", async () => {
    try {
      downloadBlob(`privmarket-order-${orderId}-model.onnx`, await PM.apiBlob(`/v1/orders/${orderId}/model.onnx`));
    } catch (err) {
      PM.say(PM.explain(err, "the ONNX model"));
    }
  });
};
