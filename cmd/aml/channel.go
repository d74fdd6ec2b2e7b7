package main

import (
	"strconv"
	"strings"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/spf13/cobra"
)

// channelBound parses "var=lo:hi".
func channelBound(s string) (string, contract.ChannelBound, error) {
	name, rng, ok := strings.Cut(s, "=")
	lo, hi, ok2 := strings.Cut(rng, ":")
	if !ok || !ok2 || strings.TrimSpace(name) == "" {
		return "", contract.ChannelBound{}, usagef("--bound %q: want VARIABLE=MIN:MAX", s)
	}
	a, err1 := strconv.ParseFloat(strings.TrimSpace(lo), 64)
	b, err2 := strconv.ParseFloat(strings.TrimSpace(hi), 64)
	if err1 != nil || err2 != nil {
		return "", contract.ChannelBound{}, usagef("--bound %q: MIN and MAX must be numbers", s)
	}
	return strings.TrimSpace(name), contract.ChannelBound{Min: a, Max: b}, nil
}

func newChannelCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "channel", Short: "Channel profiles: whether and how the twin may write to a line"}

	var (
		req    amlapp.ChannelSetRequest
		scene  string
		bounds []string
	)
	set := &cobra.Command{
		Use:   "set --line L --profile legacy|hybrid_twin --policy recommendation_only|hitl_governed|bounded_auto [--scene ID@VER] [--bound VAR=MIN:MAX ...] --as PERSON",
		Short: "Set the channel profile of a line (audited)",
		Args:  argsExact(0),
	}
	opCommand(a, set, "channel.set", "as", &req, func([]string) error {
		if req.Line == "" || req.Profile == "" || req.ControlPolicy == "" {
			return usagef("%s: --line, --profile and --policy are required", set.CommandPath())
		}
		if err := a.requireActor(set); err != nil {
			return err
		}
		if scene != "" {
			id, ver, ok := strings.Cut(scene, "@")
			if !ok || id == "" || ver == "" {
				return usagef("--scene %q: want ID@VERSION", scene)
			}
			req.SceneID, req.SceneVersion = id, ver
		}
		for _, b := range bounds {
			name, r, err := channelBound(b)
			if err != nil {
				return err
			}
			if _, dup := req.Bounds[name]; dup {
				return usagef("--bound: %s given twice", name)
			}
			if req.Bounds == nil {
				req.Bounds = map[string]contract.ChannelBound{}
			}
			req.Bounds[name] = r
		}
		return nil
	})
	f := set.Flags()
	f.StringVar(&req.Line, "line", "", "the line")
	f.StringVar(&req.Profile, "profile", "", "legacy or hybrid_twin")
	f.StringVar(&req.ControlPolicy, "policy", "", "recommendation_only, hitl_governed or bounded_auto")
	f.StringVar(&scene, "scene", "", "the scene the channel serves (ID@VERSION)")
	f.StringArrayVar(&bounds, "bound", nil, "absolute bounds of a control for bounded_auto (VAR=MIN:MAX, repeatable)")
	f.StringVar(&req.ChannelID, "channel-id", "", "channel id (default ch-LINE)")
	f.String("as", "", "who sets the channel")

	var sr amlapp.ChannelShowRequest
	show := &cobra.Command{Use: "show --line L", Short: "Show the channel profile of a line (AML_NOT_FOUND: no channel, the guard never writes)", Args: argsExact(0)}
	opCommand(a, show, "channel.show", "", &sr, func([]string) error {
		if sr.Line == "" {
			return usagef("%s: --line is required", show.CommandPath())
		}
		return nil
	})
	show.Flags().StringVar(&sr.Line, "line", "", "the line")

	cmd.AddCommand(set, show)
	return cmd
}
