# ENVLOG_DIR names the environment when -C does not
cd "$FIXTURES/envs" && ENVLOG_DIR=damaged envlog sessions
