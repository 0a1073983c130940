// Admin pages: markets, one market (trade-off curve, set γ, orders), an order's allocation.
"use strict";

PM.pages.markets = async function () {
  const page = await PM.api("/v1/markets?limit=100");
  const rows = page.items.map((m) => [
    String(m.id),
    PM.me.role === "admin" ? PM.link(`/console/markets/${m.id}`, m.name) : m.name,
    m.task,
    PM.fmt(m.mechanism.gamma),
    String(m.validation_size),
    PM.fmt(m.lifetime_epsilon_cap),
    PM.me.role === "buyer" ? PM.link(`/console/buy?market=${m.id}`, "order a model") : "",
  ]);
  PM.fillTable(PM.byId("markets"), rows, "No markets yet.");
  if (PM.me.role === "admin") await setupCreateMarket();
};

// Create a market: the form is generated from MarketCreate in /openapi.json.
async function setupCreateMarket() {
  const box = PM.byId("create-market");
  box.hidden = false;
  const schemas = await PM.openapi();
  const form = PM.schemaForm(PM.byId("create-market-fields"), "MarketCreate", schemas, {
    value: {
      task: "classification",
      features: [{ name: "", low: 0, high: 1 }],
      cost_prior: { family: "uniform", params: { low: 0, high: 1 } },
    },
  });
  PM.byId("create-market-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    PM.clearMessage();
    let body;
    try {
      body = form.read();
    } catch (err) {
      return PM.say(`Check the form: ${err.message}.`);
    }
    try {
      const market = await PM.api("/v1/markets", { method: "POST", body });
      window.location.assign(`/console/markets/${market.id}`);
    } catch (err) {
      PM.say(err instanceof PM.ApiError && err.status === 422 ? `The market was refused: ${err.message}` : PM.explain(err, "the market"));
    }
  });
}

function showSettings(market) {
  PM.byId("market-name").textContent = market.name;
  const mech = market.mechanism;
  PM.dl(PM.byId("settings"), [
    ["id", String(market.id)],
    ["task", market.task],
    ["partition", market.partition || "horizontal"],
    ["features", String(market.features.length)],
    ["cost prior", `${market.cost_prior.family} ${JSON.stringify(market.cost_prior.params)}`],
    ["γ", PM.fmt(mech.gamma)],
    ["ε average cap (L)", PM.fmt(mech.eps_avg_max)],
    ["k", PM.fmt(mech.k)],
    ["settings version", String(market.parameters_version)],
    ["lifetime ε cap per seller", PM.fmt(market.lifetime_epsilon_cap)],
    ["validation records", String(market.validation_size)],
  ]);
}

function pointLabel(p) {
  const eps = p.epsilon || {};
  return [
    `γ = ${PM.fmt(p.gamma)}`,
    `validation error ${PM.fmt(p.validation_error)}` +
      (Array.isArray(p.validation_error_band)
        ? ` (± ${PM.fmt(p.validation_error_se)} standard error over ${p.n_draws} draws)`
        : ""),
    `total payment ${PM.money(p.total_payment)} (currency units)`,
    `sellers used ${p.sellers_used ?? "—"}`,
    `ε min ${PM.fmt(eps.min)} · median ${PM.fmt(eps.median)} · max ${PM.fmt(eps.max)}`,
  ];
}

// What the curve's vertical axis measures, by the market's task (the mechanism's
// validation score, averaged over noise draws).
function metricOf(market) {
  if (market.task === "classification") {
    return { axis: "validation error (share misclassified, 0–1)", text: "share of the public validation records the released model misclassifies (0 to 1)" };
  }
  const loss = market.task === "quantile" ? "pinball loss" : "squared-error loss";
  return {
    axis: `validation ${loss} (target scaled to [−1, 1])`,
    text: `mean ${loss} of the released model on the public validation set, with the target scaled to [−1, 1] by the market's public target bounds`,
  };
}

function drawCurve(marketId, points, market, learner) {
  const usable = points
    .filter((p) => p.total_payment !== null && p.validation_error !== null)
    .sort((a, b) => a.gamma - b.gamma);
  const choice = PM.byId("gamma-choice");
  choice.hidden = true;
  let chosen = null;
  const metric = metricOf(market);
  PM.byId("curve-note").textContent =
    `Prices the learner ${learner || "(the market's default)"}. Vertical: ${metric.text}. ` +
    "Horizontal: total payment to the sellers in currency units (Myerson payments). One point per γ; " +
    "each point is the mean over several noise draws of a model released on public validation data, " +
    "and the shaded band is that mean ± one standard error.";
  PM.byId("curve-note").hidden = false;
  PM.charts.scatter(
    PM.byId("curve"),
    usable.map((p) => ({
      x: p.total_payment,
      y: p.validation_error,
      band: p.validation_error_band || null,
      label: pointLabel(p),
      tag: `γ=${PM.fmt(p.gamma)}`,
      point: p,
    })),
    {
      title: `${metric.axis} vs total payment, one point per γ (mean with ± one standard error band)`,
      bandLabel: "mean ± one standard error over the noise draws",
      xLabel: "total payment (currency units)",
      yLabel: metric.axis,
      connect: true,
      onClick: (item, node) => {
        chosen = item.point;
        for (const dot of document.querySelectorAll("#curve .point")) dot.classList.remove("selected");
        node.classList.add("selected");
        PM.byId("gamma-choice-text").textContent =
          `γ = ${PM.fmt(chosen.gamma)}: validation error ${PM.fmt(chosen.validation_error)}, ` +
          `total payment ${PM.money(chosen.total_payment)}.`;
        PM.byId("set-gamma").textContent = `Set γ = ${PM.fmt(chosen.gamma)} for new orders`;
        choice.hidden = false;
      },
    },
  );
  PM.byId("curve-help").hidden = false;
  PM.byId("set-gamma").onclick = async () => {
    if (!chosen) return;
    try {
      const market = await PM.api(`/v1/markets/${marketId}`, {
        method: "PATCH",
        body: { mechanism: { gamma: chosen.gamma } },
      });
      showSettings(market);
      PM.byId("gamma-result").textContent =
        `γ is now ${PM.fmt(market.mechanism.gamma)} (settings version ${market.parameters_version}); ` +
        "orders placed from now on use it.";
    } catch (err) {
      PM.say(PM.explain(err, "the market"));
    }
  };
}

async function runTradeoff(market) {
  const marketId = market.id;
  const text = PM.byId("gammas").value.trim();
  const gammas = text ? text.split(/[,\s]+/).filter(Boolean).map(Number) : null;
  if (gammas && gammas.some((g) => !Number.isFinite(g) || g < 0)) {
    return PM.say("The γ grid must be numbers ≥ 0, separated by commas.");
  }
  PM.clearMessage();
  PM.byId("run-tradeoff").disabled = true;
  try {
    const { job_id: jobId } = await PM.api(`/v1/markets/${marketId}/tradeoff`, {
      method: "POST",
      body: { ...(gammas ? { gammas } : {}), learner: PM.byId("tradeoff-learner").value || undefined },
    });
    // The job id (not a secret) goes in the address, so a reload shows the same curve.
    window.history.replaceState(null, "", `?job=${jobId}`);
    await watchJob(market, jobId);
  } catch (err) {
    PM.say(`The trade-off job was not started: ${PM.explain(err, "the trade-off job")}`);
  } finally {
    PM.byId("run-tradeoff").disabled = false;
  }
}

async function watchJob(market, jobId) {
  const marketId = market.id;
  const status = PM.byId("job-status");
  const bar = PM.byId("job-progress");
  bar.hidden = false;
  try {
    const job = await PM.poll(
      () => PM.api(`/v1/jobs/${jobId}`),
      (j) => {
        status.textContent = `Job ${jobId}: ${j.status} (${j.progress.stage.replace(/_/g, " ")}, ${Math.round(j.progress.fraction * 100)}%)`;
        bar.value = j.progress.fraction;
        return j.status === "succeeded" || j.status === "failed";
      },
    );
    if (job.market_id !== marketId) {
      PM.say(`Trade-off job ${jobId} belongs to market ${job.market_id}, not this one.`);
    } else if (job.status === "failed") {
      PM.say(`The trade-off job failed: ${job.error}`);
    } else {
      drawCurve(marketId, job.points, market, (job.result && job.result.learner) || PM.byId("tradeoff-learner").value);
    }
  } catch (err) {
    PM.say(PM.explain(err, `trade-off job ${jobId}`));
  }
}

PM.pages.market = async function (data) {
  const marketId = Number(data.marketId);
  const market = await PM.load(`/v1/markets/${marketId}`, `market ${marketId}`);
  showSettings(market);
  const learners = (await PM.api(`/v1/learners?market_id=${marketId}`)).items;
  PM.byId("tradeoff-learner").replaceChildren(
    ...learners.map((l) => PM.el("option", { value: l.name }, l.name)),
  );
  PM.byId("tradeoff-form").addEventListener("submit", (event) => {
    event.preventDefault();
    runTradeoff(market);
  });
  const jobId = Number(new URLSearchParams(window.location.search).get("job"));
  if (Number.isInteger(jobId) && jobId > 0) watchJob(market, jobId);
  await setupEditMarket(market);
  const orders = await PM.api(`/v1/orders?market_id=${marketId}&limit=100`);
  const rows = orders.items.map((o) => [
    PM.link(`/console/orders/${o.id}`, `#${o.id}`),
    o.status,
    o.learner,
    PM.money(o.budget),
    PM.fmt(o.summary ? o.summary.gamma : o.gamma),
    PM.money(o.summary ? o.summary.total_paid : null),
    o.summary && o.summary.sellers_used !== undefined ? String(o.summary.sellers_used) : "—",
    o.status === "succeeded" ? PM.link(`/console/orders/${o.id}/allocations`, "allocation") : "",
  ]);
  PM.fillTable(PM.byId("orders"), rows, "No orders in this market yet.");
  await showOffers(marketId);
};

// The market's sellers and their offers (admins), newest first.
async function showOffers(marketId) {
  const page = await PM.api(`/v1/markets/${marketId}/offers?limit=100`);
  const active = await PM.api(`/v1/markets/${marketId}/offers?status=active&limit=1`);
  PM.byId("offers-summary").textContent =
    `${active.total} active offers; ${page.total} offers in all (including replaced and withdrawn)` +
    (page.total > page.items.length ? `; the newest ${page.items.length} are shown.` : ".");
  PM.fillTable(
    PM.byId("market-offers"),
    page.items.map((o) => [
      `#${o.id}`,
      `${o.seller_name} (#${o.seller_id})`,
      o.status,
      PM.fmt(o.reported_cost),
      PM.fmt(o.max_epsilon),
      String(o.n_records),
      new Date(o.created_at).toLocaleString(),
    ]),
    "No offers in this market yet.",
  );
}

// Edit settings: the form is generated from MarketUpdate in /openapi.json, filled with the
// current values; only the fields that changed are sent.
async function setupEditMarket(market) {
  const schemas = await PM.openapi();
  const current = {
    name: market.name,
    lifetime_epsilon_cap: market.lifetime_epsilon_cap,
    mechanism: Object.fromEntries(
      Object.entries(market.mechanism).filter(([k]) => k in schemas.MechanismUpdate.properties),
    ),
  };
  const form = PM.schemaForm(PM.byId("edit-market-fields"), "MarketUpdate", schemas, { value: current, partial: true });
  PM.byId("edit-market-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    PM.clearMessage();
    let read;
    try {
      read = form.read() || {};
    } catch (err) {
      return PM.say(`Check the form: ${err.message}.`);
    }
    const body = {};
    for (const [k, v] of Object.entries(read)) {
      if (k === "mechanism") {
        const changed = Object.fromEntries(
          Object.entries(v).filter(([mk, mv]) => JSON.stringify(mv) !== JSON.stringify(current.mechanism[mk])),
        );
        if (Object.keys(changed).length) body.mechanism = changed;
      } else if (JSON.stringify(v) !== JSON.stringify(current[k])) body[k] = v;
    }
    if (!Object.keys(body).length) return PM.say("Nothing changed.", "info");
    try {
      const updated = await PM.api(`/v1/markets/${market.id}`, { method: "PATCH", body });
      showSettings(updated);
      PM.byId("edit-result").textContent =
        `Saved (settings version ${updated.parameters_version}): ${Object.keys(body).join(", ")}. Orders placed from now on use it.`;
    } catch (err) {
      PM.say(err instanceof PM.ApiError && err.status === 422 ? `The change was refused: ${err.message}` : PM.explain(err, "the market"));
    }
  });
}

// An order's allocation, one page of sellers at a time: the summary, the IR count and
// the ε histogram are the server's figures over every seller; the scatter and the
// table show the page's sellers (ALLOCATION_PAGE of them, by seller id).
const ALLOCATION_PAGE = 1000;

PM.pages.allocations = async function (data) {
  const orderId = Number(data.orderId);
  let offset = 0;
  const show = async () => {
    const alloc = await PM.load(
      `/v1/orders/${orderId}/allocations?limit=${ALLOCATION_PAGE}&offset=${offset}`,
      `the allocation of order ${orderId}`,
    );
    const items = alloc.items;
    const first = items.length ? offset + 1 : 0;
    const page = `sellers ${first}–${offset + items.length} of ${alloc.total}`;
    PM.byId("alloc-summary").textContent =
      `Order ${orderId}: ${alloc.sellers_used} of ${alloc.total} sellers given ε > 0, ` +
      `total paid ${PM.money(alloc.total_payment)}.`;
    const hist = alloc.epsilon_histogram || { low: 0, high: 1, counts: [] };
    PM.charts.bars(PM.byId("histogram"), hist, {
      title: "histogram of ε per seller (every seller of the order)",
      xLabel: "ε (total per seller)",
      yLabel: "sellers",
    });
    const spend = items.map((a) => a.privacy_cost);
    let top = 0;
    for (const a of items) top = Math.max(top, a.privacy_cost, a.payment);
    PM.charts.scatter(
      PM.byId("scatter"),
      items.map((a, i) => ({
        x: spend[i],
        y: a.payment,
        label: [
          `seller ${a.seller_id}`,
          `reported cost ${PM.fmt(a.reported_cost)} per unit ε`,
          `ε ${PM.fmt(a.epsilon)}`,
          `payment ${PM.money(a.payment)}`,
        ],
      })),
      {
        title: `payment vs reported cost times u(ε), with the IR line (${page})`,
        xLabel: "reported cost · u(ε)",
        yLabel: "payment",
        line: { from: [0, 0], to: [top, top], label: "payment = cost · u(ε) (IR)" },
        fromZero: true,
        radius: 4,
        pointClass: "dot",
      },
    );
    // IR as the server checks it: payment ≥ cost · u(ε) in the whole units paid, no slack.
    PM.byId("ir-summary").textContent =
      `IR holds for ${alloc.individually_rational} of ${alloc.total} sellers.`;
    PM.fillTable(
      PM.byId("allocations"),
      items.map((a) => [String(a.seller_id), String(a.offer_id), PM.fmt(a.reported_cost), PM.fmt(a.epsilon), PM.money(a.payment)]),
      "No seller was allocated.",
    );
    PM.byId("alloc-page").textContent = `Shown: ${page}.`;
    PM.byId("alloc-prev").disabled = offset === 0;
    PM.byId("alloc-next").disabled = offset + items.length >= alloc.total;
  };
  PM.byId("alloc-prev").addEventListener("click", () => {
    offset = Math.max(0, offset - ALLOCATION_PAGE);
    show().catch((err) => PM.say(PM.explain(err, `the allocation of order ${orderId}`)));
  });
  PM.byId("alloc-next").addEventListener("click", () => {
    offset += ALLOCATION_PAGE;
    show().catch((err) => PM.say(PM.explain(err, `the allocation of order ${orderId}`)));
  });
  await show();
};
