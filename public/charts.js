// Draws every element with a `data-chart` attribute (an ECharts option as JSON, built on the
// server with charming). ECharts (1 MB) is loaded from this server only when a page has a chart.
// A MutationObserver catches charts that appear after client-side navigation and options that
// change when a page refreshes its data, so the Leptos components need no JavaScript of their own.
(function () {
  "use strict";
  var loading = null;

  function loadEcharts() {
    if (window.echarts) return Promise.resolve(window.echarts);
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = "/vendor/echarts.min.js";
        s.onload = function () { resolve(window.echarts); };
        s.onerror = function () { loading = null; reject(new Error("echarts did not load")); };
        document.head.appendChild(s);
      });
    }
    return loading;
  }

  function draw(el) {
    var json = el.getAttribute("data-chart");
    if (!json || el.__heraldDrawn === json) return;
    loadEcharts().then(function (echarts) {
      var option;
      try { option = JSON.parse(json); } catch (e) { return; }
      var chart = echarts.getInstanceByDom(el) || echarts.init(el, null, { renderer: "svg" });
      chart.setOption(option, true);
      el.__heraldDrawn = json;
      el.setAttribute("data-chart-ready", "true");
    }).catch(function () {
      el.textContent = "The chart could not be loaded.";
    });
  }

  function scan(root) {
    if (root.nodeType !== 1) return;
    if (root.hasAttribute("data-chart")) draw(root);
    root.querySelectorAll("[data-chart]").forEach(draw);
  }

  function start() {
    scan(document.body);
    new MutationObserver(function (records) {
      records.forEach(function (r) {
        if (r.type === "attributes") draw(r.target);
        r.addedNodes.forEach(scan);
      });
    }).observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ["data-chart"] });
    window.addEventListener("resize", function () {
      if (!window.echarts) return;
      document.querySelectorAll("[data-chart-ready]").forEach(function (el) {
        var c = window.echarts.getInstanceByDom(el);
        if (c) c.resize();
      });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
