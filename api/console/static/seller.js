// Seller pages: your privacy spent per market, your earnings, your offers. Everything here
// comes from /v1/sellers/me/* or your own offer: no other seller's data is ever asked for.
"use strict";

PM.pages.seller = async function () {
  const [privacy, earnings, offers, markets, requests] = await Promise.all([
    PM.api("/v1/sellers/me/privacy"),
    PM.api("/v1/sellers/me/earnings"),
    PM.api("/v1/sellers/me/offers"),
    PM.api("/v1/markets?limit=100"),
    PM.api("/v1/sellers/me/report-requests?status=all"),
  ]);
  const names = new Map(markets.items.map((m) => [m.id, m.name]));
  const market = (id) => (names.has(id) ? `${names.get(id)} (#${id})` : `market ${id}`);
  if (privacy.items.length) {
    PM.charts.meters(
      PM.byId("privacy"),
      privacy.items.map((p) => ({
        label: market(p.market_id),
        value: p.epsilon_spent,
        max: p.lifetime_epsilon_cap,
        text: `ε ${PM.fmt(p.epsilon_spent)} of ${PM.fmt(p.lifetime_epsilon_cap)} (${PM.fmt(p.remaining)} left)`,
      })),
      { title: "privacy spent vs lifetime cap per market" },
    );
  } else {
    PM.byId("privacy").textContent = "No privacy spent yet.";
  }
  PM.byId("total-earned").textContent = PM.money(earnings.total_payment);
  PM.fillTable(
    PM.byId("earnings"),
    earnings.items.map((e) => [`#${e.order_id}`, market(e.market_id), PM.fmt(e.epsilon), PM.money(e.payment)]),
    "No order has used your data yet.",
  );
  const custodyVertical = new Set(
    markets.items.filter((m) => m.partition === "vertical" && m.custody === "seller").map((m) => m.id),
  );
  const nodeRows = [];
  for (const o of offers.items) {
    if (o.status !== "active" || !custodyVertical.has(o.market_id)) continue;
    const offer = await PM.api(`/v1/offers/${o.id}`);
    let node = null;
    try {
      node = await PM.api(`/v1/markets/${o.market_id}/nodes/${encodeURIComponent(offer.party)}`);
    } catch (err) {
      if (err.status !== 404) throw err;
    }
    nodeRows.push([
      market(o.market_id),
      String(offer.party),
      node ? node.status : "not registered",
      node ? String(node.last_seen_at).replace("T", " ").slice(0, 19) : "",
      node && node.last_session_id !== null ? `#${node.last_session_id} ${node.last_session_status}` : "none yet",
    ]);
  }
  PM.fillTable(PM.byId("nodes"), nodeRows, "You run no party node.");
  PM.fillTable(
    PM.byId("report-requests"),
    requests.items
      .slice()
      .reverse()
      .map((r) => [
        `#${r.id}`,
        `#${r.order_id}`,
        market(r.market_id),
        String(r.round),
        r.randomizer,
        PM.fmt(r.epsilon),
        r.deadline,
        r.status,
      ]),
    "No report request (only seller-custody markets send them).",
  );
  PM.fillTable(
    PM.byId("offers"),
    offers.items.map((o) => [
      PM.link(`/console/offers/${o.id}`, `#${o.id}`),
      market(o.market_id),
      o.status,
      PM.fmt(o.reported_cost),
      PM.fmt(o.max_epsilon),
      String(o.n_records),
    ]),
    "You have no offers.",
  );
  PM.setupNewOffer(markets);
};

PM.pages.offer = async function (data) {
  const offerId = Number(data.offerId);
  const offer = await PM.load(`/v1/offers/${offerId}`, `offer ${offerId}`);
  const market = await PM.api(`/v1/markets/${offer.market_id}`);
  PM.dl(PM.byId("offer"), [
    ["offer", `#${offer.id}`],
    ["market", `${market.name} (#${market.id})`],
    ["status", offer.status],
    ["reported cost per unit ε", PM.fmt(offer.reported_cost)],
    ["replaces", offer.replaces_id ? PM.link(`/console/offers/${offer.replaces_id}`, `#${offer.replaces_id}`) : "—"],
    ["max ε", PM.fmt(offer.max_epsilon)],
    ["records", String(offer.n_records)],
  ]);
  PM.fillTable(
    PM.byId("records"),
    offer.records
      .slice(0, 50)
      .map((r, i) => [
        String(i),
        Array.isArray(r.x) ? r.x.map((v) => PM.fmt(v)).join(", ") : `key ${r.key}`,
        r.y === undefined || r.y === null ? "" : PM.fmt(r.y),
      ]),
    "No records.",
  );
  PM.setupOfferActions(offer);
};

// Records as text: one record per line, the features then the label, separated by commas;
// an empty feature is a missing value (only where the market declares it missable).
PM.parseRecords = function (text) {
  const records = [];
  text.split(/\r?\n/).forEach((line, i) => {
    if (!line.trim()) return;
    const cells = line.split(",").map((c) => c.trim());
    if (cells.length < 2) throw new Error(`line ${i + 1}: give the features and then the label`);
    const num = (c, what) => {
      const v = Number(c);
      if (c === "" || !Number.isFinite(v)) throw new Error(`line ${i + 1}: ${what} ${JSON.stringify(c)} is not a number`);
      return v;
    };
    const x = cells.slice(0, -1).map((c, j) => (c === "" ? null : num(c, `feature ${j + 1}`)));
    records.push({ x, y: num(cells[cells.length - 1], "label") });
  });
  if (!records.length) throw new Error("give at least one record");
  return records;
};

PM.recordsText = (records) =>
  records.map((r) => [...r.x.map((v) => (v === null ? "" : String(v))), String(r.y)].join(", ")).join("\n");

function offerBody(records, cost, maxEps) {
  const body = { records, reported_cost: Number(cost) };
  if (String(maxEps).trim() !== "") body.max_epsilon = Number(maxEps);
  return body;
}

PM.setupNewOffer = function (markets) {
  const select = PM.byId("offer-market");
  // Markets that take records from the console: horizontal, records held by the platform.
  const horizontal = markets.items.filter((m) => m.partition !== "vertical" && m.custody !== "seller");
  select.replaceChildren(...horizontal.map((m) => PM.el("option", { value: m.id }, `#${m.id} ${m.name} (${m.task})`)));
  const describe = () => {
    const m = horizontal.find((x) => String(x.id) === select.value);
    if (!m) return;
    const features = m.features.map((f) => `${f.name} [${f.low}, ${f.high}]${f.missable ? " (may be empty)" : ""}`);
    const label = m.task === "classification" ? "the label, 1 or -1" : `the target${m.target ? ` [${m.target.low}, ${m.target.high}]` : ""}`;
    PM.byId("offer-format").textContent = `One record per line: ${features.join(", ")}, then ${label}.`;
  };
  select.addEventListener("change", describe);
  describe();
  PM.byId("new-offer-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    PM.clearMessage();
    let records;
    try {
      records = PM.parseRecords(PM.byId("offer-records").value);
    } catch (err) {
      return PM.say(`Check the records: ${err.message}.`);
    }
    try {
      const offer = await PM.api(`/v1/markets/${select.value}/offers`, {
        method: "POST",
        body: offerBody(records, PM.byId("offer-cost").value, PM.byId("offer-max-eps").value),
      });
      window.location.assign(`/console/offers/${offer.id}`);
    } catch (err) {
      PM.say(err instanceof PM.ApiError && [409, 422].includes(err.status) ? `The offer was refused: ${err.message}` : PM.explain(err, "the offer"));
    }
  });
};

PM.setupOfferActions = function (offer) {
  // Records kept by their seller (or a party's column block) are not edited here.
  const plain = (offer.records || []).length && offer.records.every((r) => Array.isArray(r.x) && r.key === undefined);
  if (offer.status !== "active" || offer.party || !plain) return;
  PM.byId("offer-actions").hidden = false;
  PM.byId("new-cost").value = offer.reported_cost;
  PM.byId("new-max-eps").value = offer.max_epsilon ?? "";
  PM.byId("new-records").value = PM.recordsText(offer.records);
  const replace = async (records) => {
    PM.clearMessage();
    try {
      const next = await PM.api(`/v1/offers/${offer.id}`, {
        method: "PUT",
        body: offerBody(records, PM.byId("new-cost").value, PM.byId("new-max-eps").value),
      });
      window.location.assign(`/console/offers/${next.id}`);
    } catch (err) {
      PM.say(err instanceof PM.ApiError && [409, 422].includes(err.status) ? `The change was refused: ${err.message}` : PM.explain(err, "the offer"));
    }
  };
  PM.byId("cost-form").addEventListener("submit", (event) => {
    event.preventDefault();
    replace(offer.records);
  });
  PM.byId("records-form").addEventListener("submit", (event) => {
    event.preventDefault();
    let records;
    try {
      records = PM.parseRecords(PM.byId("new-records").value);
    } catch (err) {
      return PM.say(`Check the records: ${err.message}.`);
    }
    replace(records);
  });
  const withdraw = PM.byId("withdraw");
  const confirm = PM.byId("withdraw-confirm");
  withdraw.addEventListener("click", () => {
    confirm.hidden = false;
    withdraw.hidden = true;
  });
  confirm.addEventListener("click", async () => {
    try {
      await PM.api(`/v1/offers/${offer.id}`, { method: "DELETE" });
      window.location.reload();
    } catch (err) {
      PM.say(PM.explain(err, "the offer"));
    }
  });
};
