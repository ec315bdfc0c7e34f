// Every block of a page fits its column, and a figure shown smaller than it is opens at full size.
//
// A preformatted block (a code cell, a printed table, a docstring's literal block) still wider
// than the column gets a smaller font, down to SMALLEST_FONT of its own, where that makes it fit
// (a table keeps its columns aligned); a block that would need a smaller font has its lines
// wrapped instead. Blocks inside a folded box are fitted when the box opens.
"use strict";

(() => {
  const SMALLEST_FONT = 0.8;

  const overflows = element => element.scrollWidth > element.clientWidth + 1;
  const isShown = element => element.getClientRects().length > 0;

  function fitBlock(pre) {
    if (!isShown(pre) || pre.dataset.fitted) return;
    pre.dataset.fitted = "yes";
    if (!overflows(pre)) return;
    const ownSize = parseFloat(getComputedStyle(pre).fontSize);
    for (let scale = 0.98; scale >= SMALLEST_FONT; scale -= 0.02) {
      pre.style.fontSize = `${ownSize * scale}px`;
      if (!overflows(pre)) return;
    }
    pre.style.fontSize = "";
    pre.classList.add("wrapped");
  }

  function fitBlocks(root) {
    root.querySelectorAll("article pre, details pre").forEach(fitBlock);
  }

  function refit() {
    document.querySelectorAll("pre[data-fitted]").forEach(pre => {
      delete pre.dataset.fitted;
      pre.style.fontSize = "";
      pre.classList.remove("wrapped");
    });
    fitBlocks(document);
  }

  // A claims box's output: one line a claim, its "[measured: …]" set apart.
  function markClaims() {
    document.querySelectorAll(".tag_claims .cell_output pre").forEach(pre => {
      const lines = pre.textContent.replace(/\n$/, "").split("\n");
      pre.replaceChildren(...lines.map(line => {
        const span = document.createElement("span");
        span.className = "claim-line";
        const measured = line.lastIndexOf("[measured:");
        if (measured >= 0 && line.endsWith("]")) {
          const what = document.createElement("span");
          what.className = "claim-measured";
          what.textContent = line.slice(measured);
          span.append(line.slice(0, measured), what);
        } else {
          span.textContent = line || "\u00a0";
        }
        return span;
      }));
    });
  }

  function closeFullImage() {
    document.querySelectorAll(".image-full").forEach(overlay => overlay.remove());
  }

  function openFullImage(image) {
    const overlay = document.createElement("div");
    overlay.className = "image-full";
    overlay.title = "click or press Escape to close";
    const copy = document.createElement("img");
    copy.src = image.currentSrc || image.src;
    copy.alt = image.alt;
    overlay.append(copy);
    overlay.addEventListener("click", closeFullImage);
    document.body.append(overlay);
  }

  function markZoomable(image) {
    const shrunk = image.naturalWidth > image.getBoundingClientRect().width + 1;
    image.classList.toggle("zoomable", shrunk && !image.closest("a[href]"));
  }

  function watchImages() {
    document.querySelectorAll("article img").forEach(image => {
      if (image.complete) markZoomable(image);
      image.addEventListener("load", () => markZoomable(image));
      image.addEventListener("click", () => {
        if (image.classList.contains("zoomable")) openFullImage(image);
      });
    });
  }

  document.addEventListener("keydown", event => {
    if (event.key === "Escape") closeFullImage();
  });

  document.addEventListener("DOMContentLoaded", () => {
    markClaims();
    fitBlocks(document);
    watchImages();
    document.querySelectorAll("details").forEach(box => box.addEventListener("toggle", () => fitBlocks(box)));
    let pending;
    window.addEventListener("resize", () => {
      clearTimeout(pending);
      pending = setTimeout(() => {
        refit();
        document.querySelectorAll("article img").forEach(markZoomable);
      }, 200);
    });
  });
})();
