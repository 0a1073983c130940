// Buyer pages: place an order (params form generated from GET /v1/learners) and follow
// one order to its model. Admins see the order page too, without the model.
"use strict";

// One sentence per guarantee label (README, "what their guarantees promise").
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

function paramInput(name, spec) {
  const id = `param-${name}`;
  const attrs = { id, name, "data-param": name, "data-type": spec.type };
  let input;
  if (spec.type === "bool") {
    input = PM.el("input", { ...attrs, type: "checkbox", checked: Boolean(spec.default) });
  } else if (spec.type === "choice") {
    input = PM.el("select", attrs, (spec.choices || []).map((c) => PM.el("option", { value: c, selected: c === spec.default }, c)));
  } else {
    input = PM.el("input", {
      ...attrs,
      type: "number",
      step: spec.type === "int" ? "1" : "any",
      min: spec.minimum,
      max: spec.maximum,
      value: spec.default,
      required: true,
    });
  }
  const bounds = [
    spec.minimum !== undefined ? `≥ ${spec.minimum}` : null,
    spec.maximum !== undefined ? `≤ ${spec.maximum}` : null,
  ].filter(Boolean);
  const hint = `${spec.doc} (${spec.type}${bounds.length ? ", " + bounds.join(", ") : ""}; default ${spec.default})`;
  return PM.el("div", { class: "param" }, PM.el("label", { for: id }, name), input, PM.el("span", { class: "hint" }, hint));
}

function readParams() {
  const params = {};
  for (const input of document.querySelectorAll("[data-param]")) {
    const type = input.dataset.type;
    if (type === "bool") params[input.dataset.param] = input.checked;
    else if (type === "choice") params[input.dataset.param] = input.value;
    else params[input.dataset.param] = type === "int" ? parseInt(input.value, 10) : Number(input.value);
  }
  return params;
}

PM.pages.buy = async function () {
  const [markets, learners] = await Promise.all([PM.api("/v1/markets?limit=100"), PM.api("/v1/learners")]);
  const marketSelect = PM.byId("market");
  const learnerSelect = PM.byId("learner");
  const wanted = new URLSearchParams(window.location.search).get("market");
  marketSelect.replaceChildren(
    ...markets.items.map((m) => PM.el("option", { value: m.id, selected: String(m.id) === wanted }, `#${m.id} ${m.name} (${m.task})`)),
  );
  const byId = new Map(markets.items.map((m) => [String(m.id), m]));
  const showParams = () => {
    const learner = learners.items.find((l) => l.name === learnerSelect.value);
    const box = PM.byId("params");
    box.replaceChildren(PM.el("legend", {}, "Learner parameters"));
    PM.byId("learner-summary").textContent = learner ? `${learner.summary} · privacy model: ${learner.privacy_model}` : "";
    if (!learner) return;
    for (const [name, spec] of Object.entries(learner.params)) box.append(paramInput(name, spec));
  };
  const showLearners = () => {
    const market = byId.get(marketSelect.value);
    const fits = learners.items.filter((l) => market && l.tasks.includes(market.task));
    learnerSelect.replaceChildren(...fits.map((l) => PM.el("option", { value: l.name }, l.name)));
    if (market) PM.byId("gamma").value = market.mechanism.gamma;
    showParams();
  };
  marketSelect.addEventListener("change", showLearners);
  learnerSelect.addEventListener("change", showParams);
  showLearners();
  for (const radio of document.querySelectorAll("[name=gamma-mode]")) {
    radio.addEventListener("change", () => {
      PM.byId("gamma").disabled = !PM.byId("gamma-fixed").checked;
    });
  }
  PM.byId("order-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    PM.clearMessage();
    const body = {
      learner: learnerSelect.value,
      budget: Number(PM.byId("budget").value),
      gamma: PM.byId("gamma-fixed").checked ? Number(PM.byId("gamma").value) : null,
      params: readParams(),
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
      String(o.market_id),
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
  PM.byId("guarantee-text").textContent = GUARANTEES[privacy.guarantee] || "See the README for this label.";
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
  const rows = model.feature_names.map((name, i) => [name, PM.fmt(model.coefficients[i], 6)]);
  if (model.intercept !== null && model.intercept !== undefined) rows.push(["(intercept)", PM.fmt(model.intercept, 6)]);
  PM.fillTable(PM.byId("coefficients"), rows, "No coefficients.");
  PM.byId("model").hidden = false;
}

// The order's aggregates (api.md: what a buyer may see), for its buyer and admins.
function showSummary(order) {
  const s = order.summary || {};
  const eps = s.epsilon || {};
  PM.dl(PM.byId("summary"), [
    ["learner", order.learner],
    ["γ", `${PM.fmt(s.gamma)} (${s.gamma_source || "—"})`],
    ["total paid / budget", `${PM.money(s.total_paid)} / ${PM.money(order.budget)}`],
    ["sellers used", `${s.sellers_used ?? "—"}`],
    ["ε min / median / max", `${PM.fmt(eps.min)} / ${PM.fmt(eps.median)} / ${PM.fmt(eps.max)}`],
    ["validation error", PM.fmt(s.validation_error)],
  ]);
  PM.byId("summary-box").hidden = false;
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
  const stages = [];
  const order = await PM.poll(
    () => PM.load(`/v1/orders/${orderId}`, `order ${orderId}`),
    (o) => {
      PM.byId("order-status").textContent = o.status;
      PM.byId("order-stage").textContent = o.progress.stage;
      PM.byId("order-progress").value = o.progress.fraction;
      if (stages[stages.length - 1] !== o.progress.stage) {
        stages.push(o.progress.stage);
        PM.byId("stages").append(PM.el("li", {}, o.progress.stage));
      }
      if (o.progress.stage === "collecting") showCollection(orderId);
      return o.status === "succeeded" || o.status === "failed";
    },
    { interval: 300 },
  );
  if (order.status === "failed") {
    const box = PM.byId("order-error");
    box.textContent = `The order failed: ${order.error || "no reason was recorded"}`;
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
  showModel(await PM.api(`/v1/orders/${orderId}/model`));
};
