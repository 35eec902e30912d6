# bash completion for towers-cli (installed as /usr/share/bash-completion/completions/towers-cli).
# Completes the commands, each command's options, and the values the options take: dataset and
# model names, choices, folders and files.

# The runs of the runs folder $1 by name, or any folder by path (a word with a slash).
_towers_cli_runs()
{
    if [[ $cur == */* ]]; then
        _filedir -d
        return
    fi
    local run names=()
    for run in "$1"/*/; do
        [[ -d $run ]] || continue
        run=${run%/}
        names+=("${run##*/}")
    done
    COMPREPLY=($(compgen -W "${names[*]}" -- "$cur"))
}

_towers_cli()
{
    local cur prev words cword
    _init_completion || return

    local commands="train lr-find eval classify export runs datasets import download models devices selftest bench"
    if ((cword == 1)); then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return
    fi

    local command=${words[1]} options
    case $command in
        train)
            options="--dataset --data-dir --model --device --gpus --tf32 --precision --allreduce --gpu-data --cuda-graphs --cudnn-benchmark --bucket-mb --towers --threads-per-tower
                --batch-size --accumulate --steps --epochs --optimizer --lr --lr-schedule --momentum
                --weight-decay --ema-decay --label-smoothing --clip-grad-norm --augment --sampling --seed --init-from --best --like --run-dir --checkpoint-every
                --keep-checkpoints --resume --resume-or-start --restart --overwrite --eval-every --validation --patience --min-delta --log-every --histogram-every --loader-workers --json --help" ;;
        lr-find) options="--dataset --data-dir --model --device --gpus --towers --batch-size --accumulate --sampling --threads-per-tower --seed --precision --init-from --best --optimizer --weight-decay --label-smoothing --clip-grad-norm --min-lr --max-lr --steps --json --help" ;;
        eval) options="--checkpoint --best --data-dir --set --dataset --no-ema --layers --mistakes --batch-size --precision --tta --device --gpu --json --help" ;;
        classify) options="--checkpoint --best --top-k --no-ema --precision --tta --device --gpu --layers --json --help" ;;
        export) options="--checkpoint --best --output --opset --layout --no-ema --force --json --help" ;;
        runs) options="--runs-dir --json --trash --help" ;;
        datasets) options="--data-dir --json --help" ;;
        import) options="--name --data-dir --size --channels --fit --test-fraction --no-flip --seed --force --json --help" ;;
        download) options="--data-dir --base-url --force --help" ;;
        models) options="--save --name --force --json --help" ;;
        devices) options="--json --watch --count --help" ;;
        selftest) options="--device --gpu --tf32 --precision --no-training --filter --list --json --help" ;;
        bench) options="--model --batch-size --threads --steps --warmup --backend --device --gpu --tf32 --cuda-graphs --cudnn-benchmark --precision --per-layer --inference --json --help" ;;
        *) return ;;
    esac

    local models="cifar10-tutorial mnist-convnet fashion-fast fashion-wide cifar10-resnet"
    case $prev in
        --dataset)
            # The table's datasets, and those imported into the data folders (towers-cli import).
            local root manifest imported=()
            for root in ${TOWERS_DATA//:/ } "${XDG_DATA_HOME:-$HOME/.local/share}/towers/datasets"; do
                for manifest in "$root"/*/towers-dataset.json; do
                    [[ -f $manifest ]] || continue
                    manifest=${manifest%/towers-dataset.json}
                    imported+=("${manifest##*/}")
                done
            done
            COMPREPLY=($(compgen -W "cifar10 cifar100 cifar100-coarse mnist fashion-mnist ${imported[*]}" -- "$cur"))
            return
            ;;
        --model)
            # The built-in models, or a model file of your own network.
            COMPREPLY=($(compgen -W "$models" -- "$cur"))
            _filedir json # adds to COMPREPLY
            return
            ;;
        --device) COMPREPLY=($(compgen -W "cpu cuda" -- "$cur")); return ;;
        --gpus) COMPREPLY=($(compgen -W "all" -- "$cur")); return ;;
        --optimizer) COMPREPLY=($(compgen -W "sgd momentum nesterov adam adamw" -- "$cur")); return ;;
        --lr-schedule) COMPREPLY=($(compgen -W "constant exponential step cosine onecycle" -- "$cur")); return ;;
        --augment) COMPREPLY=($(compgen -W "default none" -- "$cur")); return ;;
        --sampling) COMPREPLY=($(compgen -W "uniform balanced" -- "$cur")); return ;;
        --set) COMPREPLY=($(compgen -W "test validation train all" -- "$cur")); return ;;
        --allreduce) COMPREPLY=($(compgen -W "auto host" -- "$cur")); return ;;
        --gpu-data) COMPREPLY=($(compgen -W "auto off" -- "$cur")); return ;;
        --cuda-graphs|--cudnn-benchmark) COMPREPLY=($(compgen -W "on off" -- "$cur")); return ;;
        --precision) COMPREPLY=($(compgen -W "fp32 bf16" -- "$cur")); return ;;
        --tta) COMPREPLY=($(compgen -W "none mirror" -- "$cur")); return ;;
        --backend) COMPREPLY=($(compgen -W "onednn reference cuda" -- "$cur")); return ;;
        --data-dir | --run-dir | --runs-dir) _filedir -d; return ;;
        --like) _towers_cli_runs "${TOWERS_RUNS:-${XDG_DATA_HOME:-$HOME/.local/share}/towers/runs}"; return ;;
        --checkpoint | --init-from) _filedir safetensors; return ;;
        --output) _filedir onnx; return ;;
        --save) _filedir json; return ;;
        --layout) COMPREPLY=($(compgen -W "nhwc nchw" -- "$cur")); return ;;
        --channels) COMPREPLY=($(compgen -W "1 3 auto" -- "$cur")); return ;;
        --fit) COMPREPLY=($(compgen -W "crop squash fill" -- "$cur")); return ;;
        --towers | --threads-per-tower | --batch-size | --accumulate | --steps | --epochs | --lr | --momentum | \
            --weight-decay | --ema-decay | --label-smoothing | --clip-grad-norm | --seed | --checkpoint-every | --keep-checkpoints | \
            --eval-every | --validation | --patience | --min-delta | --log-every | --histogram-every | --loader-workers | --top-k | --threads | --warmup | --base-url | --count | \
            --gpu | --opset | --bucket-mb | --name | --size | --test-fraction)
            return ;;
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$options" -- "$cur"))
        return
    fi
    case $command in
        classify) _filedir '@(png|PNG|jpg|JPG|jpeg|JPEG|bmp|BMP|ppm|PPM|pgm|PGM|gif|GIF)' ;;
        download) COMPREPLY=($(compgen -W "cifar10 cifar100 cifar100-coarse mnist fashion-mnist" -- "$cur")) ;;
        import) _filedir -d ;;
        models)
            COMPREPLY=($(compgen -W "$models" -- "$cur"))
            _filedir json
            ;;
        runs)
            # The runs of the runs folder (--runs-dir, else $TOWERS_RUNS, else the user's) by
            # name, or any folder by path.
            local runs_dir=${TOWERS_RUNS:-${XDG_DATA_HOME:-$HOME/.local/share}/towers/runs} i
            for ((i = 2; i < cword; i++)); do
                [[ ${words[i]} == --runs-dir ]] && runs_dir=${words[i + 1]}
            done
            _towers_cli_runs "$runs_dir"
            ;;
    esac
} && complete -F _towers_cli towers-cli
