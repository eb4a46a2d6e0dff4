// Hand-written: the end-of-chapter quizzes answer in the browser, offline.
// The forms come from tinybert/exercises/quiz.py (Quiz._repr_html_). A question holds the
// fingerprint of its right answer, never the answer; this file computes the same
// fingerprint (32-bit FNV-1a of "quiz/index/answer") of what the reader chose.
(function () {
  "use strict";

  function fingerprint(text) {
    var bytes = new TextEncoder().encode(text);
    var value = 0x811c9dc5;
    for (var i = 0; i < bytes.length; i++) {
      value = Math.imul(value ^ bytes[i], 0x01000193) >>> 0;
    }
    return ("0000000" + value.toString(16)).slice(-8);
  }

  function forms(question) {
    if (question.dataset.kind === "choice") {
      var picked = question.querySelector("input[type=radio]:checked");
      return picked ? [picked.value] : [];
    }
    var raw = question.querySelector("input[type=text]").value;
    var value = parseFloat(raw.replace(/,/g, "").replace(/%$/, "").trim());
    if (isNaN(value)) return [];
    var decimals = parseInt(question.dataset.decimals, 10);
    var unit = Math.pow(10, -decimals);
    return [0, -1, 1].map(function (k) {
      var text = (value + k * unit).toFixed(decimals);
      return /^-0(\.0*)?$/.test(text) ? text.slice(1) : text;
    });
  }

  function check(quiz, question) {
    var name = quiz.dataset.quiz, index = question.dataset.index;
    var feedback = question.querySelector(".tinybert-feedback");
    var attempts = forms(question);
    if (attempts.length === 0) {
      feedback.textContent = "Choose or type an answer first.";
      feedback.className = "tinybert-feedback";
      return;
    }
    var right = attempts.some(function (form) {
      return fingerprint(name + "/" + index + "/" + form) === question.dataset.digest;
    });
    feedback.textContent = right ? "✓ Right. " + (question.dataset.explain || "")
                                 : "✗ Not quite: read the section again and try once more.";
    feedback.className = "tinybert-feedback " + (right ? "right" : "wrong");
  }

  function setUp() {
    document.querySelectorAll(".tinybert-quiz").forEach(function (quiz) {
      quiz.classList.add("tinybert-quiz-live");
      quiz.querySelectorAll(".tinybert-question").forEach(function (question) {
        question.querySelector("button").addEventListener("click", function () {
          check(quiz, question);
        });
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
