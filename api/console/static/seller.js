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
};
