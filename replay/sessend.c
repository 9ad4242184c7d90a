/* SPDX-License-Identifier: MIT */
/*
 * sessend.c - the end of a session before upkeep: the session closed and,
 * when it wrote in the process that began it, handed to the remotes'
 * automatic push (remote/auto.c sets the hook).  envlog_session_end()
 * (maintain.c) then looks at the environment's upkeep; the sessions that
 * compaction records itself (eviction's) end here, below compaction, so
 * that ending one never reaches back up into it.
 */
#include "replay_int.h"

#include <unistd.h>

void (*envlog_session_end_hook)(envlog_env *env, const envlog_id128 *session,
                                int auto_push);

envlog_err envlog_session_finish(envlog_session *s, int *want)
{
    *want = -1;
    if (!s)
        return ENVLOG_OK;
    envlog_env *env = envlog_session_env(s);
    envlog_session_stats st;
    envlog_session_stats_get(s, &st);
    int compact = envlog_session_auto_compact(s);
    int push = envlog_session_auto_push(s);
    envlog_id128 id = envlog_session_id(s);
    bool own = getpid() == envlog_session_pid(s);
    envlog_err e = envlog_session_close(s);
    /* Only a session that wrote, in the process that began it, looks at
     * the environment's upkeep: observing costs nothing. */
    if (st.on_disk && own) {
        if (envlog_session_end_hook && !env->readonly && !env->no_upkeep)
            envlog_session_end_hook(env, &id, push);
        *want = compact;
    }
    return e;
}
