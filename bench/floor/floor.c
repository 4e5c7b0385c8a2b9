/*
 * The floor: a minimal module doing only what the module API forces on a rate command
 * under this module's design, to measure RL.* against (bench/instructions.sh). Nothing of
 * rate limiting itself:
 *
 *   FLOOR.HIT key a b c   parse three integers (c: the TTL in ms); open the key for
 *                         writing; read its value
 *                         (a word of its own type, packed in the pointer); store a new
 *                         word; set an absolute expiry; signal the key; fire a keyspace
 *                         event; propagate an effect (FLOOR.APPLY key <48-byte payload>,
 *                         as RL._APPLY does, never the command); reply five integers.
 *   FLOOR.APPLY key blob  what a replica or the AOF would run (a no-op write here).
 *
 * Built by bench/instructions.sh with the redismodule.h that redis-module ships.
 */
#include "redismodule.h"
#include <stdint.h>
#include <string.h>

static RedisModuleType *FloorType;

static void *floor_load(RedisModuleIO *rdb, int encver) {
    (void)encver;
    return (void *)(uintptr_t)(RedisModule_LoadUnsigned(rdb) | 1);
}
static void floor_save(RedisModuleIO *rdb, void *value) {
    RedisModule_SaveUnsigned(rdb, (uint64_t)(uintptr_t)value);
}
static void floor_free(void *value) { (void)value; /* packed in the pointer: nothing */ }

static int floor_hit(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 5) return RedisModule_WrongArity(ctx);
    long long a, b, c;
    if (RedisModule_StringToLongLong(argv[2], &a) != REDISMODULE_OK ||
        RedisModule_StringToLongLong(argv[3], &b) != REDISMODULE_OK ||
        RedisModule_StringToLongLong(argv[4], &c) != REDISMODULE_OK || a < 1 || b < 1 || c < 1)
        return RedisModule_ReplyWithError(ctx, "ERR value is not an integer or out of range");
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    uint64_t old = 0;
    if (type == REDISMODULE_KEYTYPE_MODULE && RedisModule_ModuleTypeGetType(key) == FloorType)
        old = (uint64_t)(uintptr_t)RedisModule_ModuleTypeGetValue(key);
    else if (type != REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    uint64_t word = ((old >> 1) + 1) << 1 | 1;
    if (type == REDISMODULE_KEYTYPE_EMPTY)
        RedisModule_ModuleTypeSetValue(key, FloorType, (void *)(uintptr_t)word);
    else
        RedisModule_ModuleTypeReplaceValue(key, FloorType, (void *)(uintptr_t)word, NULL);
    mstime_t at = RedisModule_Milliseconds() + c;
    RedisModule_SetAbsExpire(key, at);
    RedisModule_SignalModifiedKey(ctx, argv[1]);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "floor.hit", argv[1]);
    char payload[48];
    memset(payload, 0, sizeof payload);
    memcpy(payload, &at, sizeof at);
    memcpy(payload + 8, &word, sizeof word);
    RedisModule_Replicate(ctx, "FLOOR.APPLY", "sb", argv[1], payload, sizeof payload);
    RedisModule_CloseKey(key);
    RedisModule_ReplyWithArray(ctx, 5);
    RedisModule_ReplyWithLongLong(ctx, 1);
    RedisModule_ReplyWithLongLong(ctx, a);
    RedisModule_ReplyWithLongLong(ctx, a - 1);
    RedisModule_ReplyWithLongLong(ctx, 0);
    RedisModule_ReplyWithLongLong(ctx, c);
    return REDISMODULE_OK;
}

static int floor_apply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv; (void)argc;
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    RedisModuleTypeMethods tm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = floor_load, .rdb_save = floor_save, .free = floor_free,
    };
    FloorType = RedisModule_CreateDataType(ctx, "floortyp1", 1, &tm);
    if (FloorType == NULL) return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.hit", floor_hit, "write deny-oom fast", 1, 1, 1)
            == REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "floor.apply", floor_apply, "write", 1, 1, 1)
            == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
