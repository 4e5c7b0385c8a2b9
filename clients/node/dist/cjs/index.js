"use strict";
var __createBinding = (this && this.__createBinding) || (Object.create ? (function(o, m, k, k2) {
    if (k2 === undefined) k2 = k;
    var desc = Object.getOwnPropertyDescriptor(m, k);
    if (!desc || ("get" in desc ? !m.__esModule : desc.writable || desc.configurable)) {
      desc = { enumerable: true, get: function() { return m[k]; } };
    }
    Object.defineProperty(o, k2, desc);
}) : (function(o, m, k, k2) {
    if (k2 === undefined) k2 = k;
    o[k2] = m[k];
}));
var __exportStar = (this && this.__exportStar) || function(m, exports) {
    for (var p in m) if (p !== "default" && !Object.prototype.hasOwnProperty.call(exports, p)) __createBinding(exports, m, p);
};
Object.defineProperty(exports, "__esModule", { value: true });
exports.RedisRateLimitStore = exports.fastifyRateLimit = exports.expressRateLimit = exports.keys = exports.isUnavailable = exports.createGuard = exports.UNAVAILABLE_REPLIES = exports.CircuitOpenError = exports.MemoryLimiter = exports.Networks = exports.parseAddress = exports.formatAddress = exports.clientAddress = exports.addressKey = exports.tightest = exports.sfString = exports.quota = exports.windowSeconds = exports.resetParameter = exports.nextQuotaMs = exports.emissionInterval = exports.rateLimitHeaders = exports.optionArgs = exports.ruleArgs = exports.parseInfo = exports.parseDecision = exports.isUnsupportedOption = exports.TimeoutError = exports.Limiter = exports.createLimiter = void 0;
__exportStar(require("./types.js"), exports);
var limiter_js_1 = require("./limiter.js");
Object.defineProperty(exports, "createLimiter", { enumerable: true, get: function () { return limiter_js_1.createLimiter; } });
Object.defineProperty(exports, "Limiter", { enumerable: true, get: function () { return limiter_js_1.Limiter; } });
Object.defineProperty(exports, "TimeoutError", { enumerable: true, get: function () { return limiter_js_1.TimeoutError; } });
Object.defineProperty(exports, "isUnsupportedOption", { enumerable: true, get: function () { return limiter_js_1.isUnsupportedOption; } });
Object.defineProperty(exports, "parseDecision", { enumerable: true, get: function () { return limiter_js_1.parseDecision; } });
Object.defineProperty(exports, "parseInfo", { enumerable: true, get: function () { return limiter_js_1.parseInfo; } });
Object.defineProperty(exports, "ruleArgs", { enumerable: true, get: function () { return limiter_js_1.ruleArgs; } });
Object.defineProperty(exports, "optionArgs", { enumerable: true, get: function () { return limiter_js_1.optionArgs; } });
var headers_js_1 = require("./headers.js");
Object.defineProperty(exports, "rateLimitHeaders", { enumerable: true, get: function () { return headers_js_1.rateLimitHeaders; } });
Object.defineProperty(exports, "emissionInterval", { enumerable: true, get: function () { return headers_js_1.emissionInterval; } });
Object.defineProperty(exports, "nextQuotaMs", { enumerable: true, get: function () { return headers_js_1.nextQuotaMs; } });
Object.defineProperty(exports, "resetParameter", { enumerable: true, get: function () { return headers_js_1.resetParameter; } });
Object.defineProperty(exports, "windowSeconds", { enumerable: true, get: function () { return headers_js_1.windowSeconds; } });
Object.defineProperty(exports, "quota", { enumerable: true, get: function () { return headers_js_1.quota; } });
Object.defineProperty(exports, "sfString", { enumerable: true, get: function () { return headers_js_1.sfString; } });
Object.defineProperty(exports, "tightest", { enumerable: true, get: function () { return headers_js_1.tightest; } });
var ip_js_1 = require("./ip.js");
Object.defineProperty(exports, "addressKey", { enumerable: true, get: function () { return ip_js_1.addressKey; } });
Object.defineProperty(exports, "clientAddress", { enumerable: true, get: function () { return ip_js_1.clientAddress; } });
Object.defineProperty(exports, "formatAddress", { enumerable: true, get: function () { return ip_js_1.formatAddress; } });
Object.defineProperty(exports, "parseAddress", { enumerable: true, get: function () { return ip_js_1.parseAddress; } });
Object.defineProperty(exports, "Networks", { enumerable: true, get: function () { return ip_js_1.Networks; } });
var memory_js_1 = require("./memory.js");
Object.defineProperty(exports, "MemoryLimiter", { enumerable: true, get: function () { return memory_js_1.MemoryLimiter; } });
var guard_js_1 = require("./guard.js");
Object.defineProperty(exports, "CircuitOpenError", { enumerable: true, get: function () { return guard_js_1.CircuitOpenError; } });
Object.defineProperty(exports, "UNAVAILABLE_REPLIES", { enumerable: true, get: function () { return guard_js_1.UNAVAILABLE_REPLIES; } });
Object.defineProperty(exports, "createGuard", { enumerable: true, get: function () { return guard_js_1.createGuard; } });
Object.defineProperty(exports, "isUnavailable", { enumerable: true, get: function () { return guard_js_1.isUnavailable; } });
Object.defineProperty(exports, "keys", { enumerable: true, get: function () { return guard_js_1.keys; } });
var express_js_1 = require("./express.js");
Object.defineProperty(exports, "expressRateLimit", { enumerable: true, get: function () { return express_js_1.expressRateLimit; } });
var fastify_js_1 = require("./fastify.js");
Object.defineProperty(exports, "fastifyRateLimit", { enumerable: true, get: function () { return fastify_js_1.fastifyRateLimit; } });
var store_js_1 = require("./store.js");
Object.defineProperty(exports, "RedisRateLimitStore", { enumerable: true, get: function () { return store_js_1.RedisRateLimitStore; } });
