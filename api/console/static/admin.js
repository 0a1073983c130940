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
};

function showSettings(market) {
  PM.byId("market-name").textContent = market.name;
  const mech = market.mechanism;
  PM.dl(PM.byId("settings"), [
    ["id", String(market.id)],
    ["task", market.task],
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
    `validation error ${PM.fmt(p.validation_error)}`,
    `total payment ${PM.money(p.total_payment)}`,
    `sellers used ${p.sellers_used ?? "—"}`,
    `ε min ${PM.fmt(eps.min)} · median ${PM.fmt(eps.median)} · max ${PM.fmt(eps.max)}`,
  ];
}

function drawCurve(marketId, points) {
  const usable = points
    .filter((p) => p.total_payment !== null && p.validation_error !== null)
    .sort((a, b) => a.gamma - b.gamma);
  const choice = PM.byId("gamma-choice");
  let chosen = null;
  PM.charts.scatter(
    PM.byId("curve"),
    usable.map((p) => ({ x: p.total_payment, y: p.validation_error, label: pointLabel(p), tag: `γ=${PM.fmt(p.gamma)}`, point: p })),
    {
      title: "validation error vs total payment, one point per γ",
      xLabel: "total payment",
      yLabel: "validation error",
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

async function runTradeoff(marketId) {
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
      body: gammas ? { gammas } : {},
    });
    // The job id (not a secret) goes in the address, so a reload shows the same curve.
    window.history.replaceState(null, "", `?job=${jobId}`);
    await watchJob(marketId, jobId);
  } catch (err) {
    PM.say(`The trade-off job was not started: ${PM.explain(err, "the trade-off job")}`);
  } finally {
    PM.byId("run-tradeoff").disabled = false;
  }
}

async function watchJob(marketId, jobId) {
  const status = PM.byId("job-status");
  const bar = PM.byId("job-progress");
  bar.hidden = false;
  try {
    const job = await PM.poll(
      () => PM.api(`/v1/jobs/${jobId}`),
      (j) => {
        status.textContent = `Job ${jobId}: ${j.status} (${j.progress.stage}, ${Math.round(j.progress.fraction * 100)}%)`;
        bar.value = j.progress.fraction;
        return j.status === "succeeded" || j.status === "failed";
      },
    );
    if (job.market_id !== marketId) {
      PM.say(`Trade-off job ${jobId} belongs to market ${job.market_id}, not this one.`);
    } else if (job.status === "failed") {
      PM.say(`The trade-off job failed: ${job.error}`);
    } else {
      drawCurve(marketId, job.points);
    }
  } catch (err) {
    PM.say(PM.explain(err, `trade-off job ${jobId}`));
  }
}

PM.pages.market = async function (data) {
  const marketId = Number(data.marketId);
  showSettings(await PM.load(`/v1/markets/${marketId}`, `market ${marketId}`));
  PM.byId("tradeoff-form").addEventListener("submit", (event) => {
    event.preventDefault();
    runTradeoff(marketId);
  });
  const jobId = Number(new URLSearchParams(window.location.search).get("job"));
  if (Number.isInteger(jobId) && jobId > 0) watchJob(marketId, jobId);
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
};

PM.pages.allocations = async function (data) {
  const orderId = Number(data.orderId);
  const alloc = await PM.load(`/v1/orders/${orderId}/allocations`, `the allocation of order ${orderId}`);
  const items = alloc.items;
  const used = items.filter((a) => a.epsilon > 0);
  PM.byId("alloc-summary").textContent =
    `Order ${orderId}: ${used.length} of ${items.length} sellers given ε > 0, ` +
    `total paid ${PM.money(alloc.total_payment)}.`;
  PM.charts.histogram(PM.byId("histogram"), items.map((a) => a.epsilon), {
    title: "histogram of ε per seller",
    xLabel: "ε (total per seller)",
    yLabel: "sellers",
    bins: 12,
  });
  const spend = items.map((a) => a.privacy_cost);
  const top = Math.max(0, ...spend, ...items.map((a) => a.payment));
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
      title: "payment vs reported cost times u(ε), with the IR line",
      xLabel: "reported cost · u(ε)",
      yLabel: "payment",
      line: { from: [0, 0], to: [top, top], label: "payment = cost · u(ε) (IR)" },
      fromZero: true,
      radius: 4,
      pointClass: "dot",
    },
  );
  // IR as the server checks it: payment ≥ cost · u(ε) in the whole units paid, no slack.
  const ir = items.filter((a) => a.individually_rational).length;
  PM.byId("ir-summary").textContent = `IR holds for ${ir} of ${items.length} sellers.`;
  PM.fillTable(
    PM.byId("allocations"),
    items.map((a) => [String(a.seller_id), String(a.offer_id), PM.fmt(a.reported_cost), PM.fmt(a.epsilon), PM.money(a.payment)]),
    "No seller was allocated.",
  );
};
