package deploy

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// manifests are the objects of kubernetes/*.yaml, by kind and name.
type manifests struct {
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	services     map[string]*corev1.Service
	statefulSets map[string]*appsv1.StatefulSet
	budgets      map[string]*policyv1.PodDisruptionBudget
}

// loadManifests reads every document of kubernetes/*.yaml into the
// Kubernetes API type its apiVersion and kind name, strictly: a field the
// type does not have (a misspelling, a field at the wrong level) fails,
// as the API server's strict field validation fails it.
func loadManifests(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		services: map[string]*corev1.Service{}, statefulSets: map[string]*appsv1.StatefulSet{},
		budgets: map[string]*policyv1.PodDisruptionBudget{}}
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("kubernetes/*.yaml: %v, %d files", err, len(files))
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(b), "\n---\n") {
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s document %d: %v", file, i+1, err)
			}
			where := file + " " + head.Kind + " " + head.Metadata.Name
			if head.Metadata.Name == "" {
				t.Errorf("%s document %d: no metadata.name", file, i+1)
			}
			var obj any
			switch head.APIVersion + " " + head.Kind {
			case "v1 ConfigMap":
				o := &corev1.ConfigMap{}
				m.configMaps[head.Metadata.Name], obj = o, o
			case "v1 Secret":
				o := &corev1.Secret{}
				m.secrets[head.Metadata.Name], obj = o, o
			case "v1 Service":
				o := &corev1.Service{}
				m.services[head.Metadata.Name], obj = o, o
			case "apps/v1 StatefulSet":
				o := &appsv1.StatefulSet{}
				m.statefulSets[head.Metadata.Name], obj = o, o
			case "policy/v1 PodDisruptionBudget":
				o := &policyv1.PodDisruptionBudget{}
				m.budgets[head.Metadata.Name], obj = o, o
			default:
				t.Fatalf("%s: apiVersion %q kind %q is none the test knows", where, head.APIVersion, head.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
	}
	return m
}

// selects reports whether a selector's labels all hold in labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The manifests hang together: the StatefulSet's headless Service exists
// and publishes pods before they are ready (they join through it), every
// selector picks the pods, the probes ask /healthz and /readyz on the
// port metrics-addr names, the config file is mounted where the args
// name it and includes the Secret's file where that is mounted, and each
// pod announces its own IP.
func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	if len(m.statefulSets) != 1 || len(m.configMaps) != 1 || len(m.secrets) != 1 {
		t.Fatalf("%d StatefulSets, %d ConfigMaps, %d Secrets: want one of each", len(m.statefulSets), len(m.configMaps), len(m.secrets))
	}
	ss := m.statefulSets[slices.Collect(maps.Keys(m.statefulSets))[0]]
	pod := ss.Spec.Template
	if ss.Spec.Selector == nil || !selects(ss.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("the StatefulSet's selector %v does not select its pods %v", ss.Spec.Selector, pod.Labels)
	}
	headless := m.services[ss.Spec.ServiceName]
	if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("serviceName %q: want a headless Service (clusterIP None) with publishNotReadyAddresses", ss.Spec.ServiceName)
	}
	for name, svc := range m.services {
		if !selects(svc.Spec.Selector, pod.Labels) {
			t.Errorf("Service %s selects %v, not the pods %v", name, svc.Spec.Selector, pod.Labels)
		}
	}
	for name, pdb := range m.budgets {
		if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, pod.Labels) {
			t.Errorf("PodDisruptionBudget %s does not select the pods", name)
		}
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	ports := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		ports[p.Name] = p
	}

	var cm *corev1.ConfigMap
	for _, v := range m.configMaps {
		cm = v
	}
	conf := cm.Data["cellserver.conf"]
	_, mport, _ := strings.Cut(confValue(conf, "metrics-addr"), ":")
	for probe, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != probe {
			t.Errorf("want a probe on %s, got %+v", probe, p)
			continue
		}
		if cp, ok := ports[p.HTTPGet.Port.String()]; !ok || strconv.Itoa(int(cp.ContainerPort)) != mport {
			t.Errorf("the probe on %s asks port %s, not metrics-addr's %s", probe, p.HTTPGet.Port.String(), mport)
		}
	}
	if confValue(conf, "cluster-enabled") != "yes" || !strings.HasPrefix(confValue(conf, "cluster-join"), ss.Spec.ServiceName+":") {
		t.Errorf("the config does not join the cluster through %s: cluster-enabled %q, cluster-join %q", ss.Spec.ServiceName,
			confValue(conf, "cluster-enabled"), confValue(conf, "cluster-join"))
	}
	if p := ports["resp"]; strconv.Itoa(int(p.ContainerPort)) != confValue(conf, "port") {
		t.Errorf("the resp port %d is not the config's port %s", p.ContainerPort, confValue(conf, "port"))
	}
	if want := []string{"--cluster-announce-ip", "$(POD_IP)"}; len(c.Args) != 3 || !slices.Equal(c.Args[1:], want) {
		t.Errorf("args %q: want the config file, then %q", c.Args, want)
	}
	podIP := false
	for _, e := range c.Env {
		podIP = podIP || e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP"
	}
	if !podIP {
		t.Errorf("no POD_IP from status.podIP for --cluster-announce-ip")
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	var configMounted, secretMounted, dataMounted bool
	for _, vm := range c.VolumeMounts {
		v, ok := volumes[vm.Name]
		switch {
		case ok && v.ConfigMap != nil:
			if m.configMaps[v.ConfigMap.Name] == nil {
				t.Errorf("volume %s: no ConfigMap %s", vm.Name, v.ConfigMap.Name)
			}
			configMounted = len(c.Args) > 0 && vm.MountPath == c.Args[0] && cm.Data[vm.SubPath] != ""
		case ok && v.Secret != nil:
			sec := m.secrets[v.Secret.SecretName]
			if sec == nil {
				t.Errorf("volume %s: no Secret %s", vm.Name, v.Secret.SecretName)
				continue
			}
			for key := range sec.StringData {
				secretMounted = secretMounted || confValue(conf, "include") == vm.MountPath+"/"+key
			}
		case !ok && vm.Name == "data":
			dataMounted = vm.MountPath == confValue(conf, "dir") && len(ss.Spec.VolumeClaimTemplates) == 1 &&
				ss.Spec.VolumeClaimTemplates[0].Name == "data"
		}
	}
	if !configMounted || !secretMounted || !dataMounted {
		t.Errorf("mounts: the config file where args name it %v, the Secret's file where the config includes it %v, the data volume at dir %v",
			configMounted, secretMounted, dataMounted)
	}
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("the pod does not require a non-root user")
	}
}

// A pod's config, the ConfigMap's file with the Secret's included, loads
// and serves in cluster mode: cellserver started on it as a pod would be
// (its ports and dir pointed at the test's, joining itself instead of
// the headless Service) is ready and asks for the Secret's password.
func TestKubernetesConfigServes(t *testing.T) {
	m := loadManifests(t)
	var conf, secret string
	for _, cm := range m.configMaps {
		conf = cm.Data["cellserver.conf"]
	}
	for _, s := range m.secrets {
		secret = s.StringData["secrets.conf"]
	}
	dir := t.TempDir()
	secretPath := filepath.Join(dir, "secrets.conf")
	if err := os.WriteFile(secretPath, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	conf = strings.ReplaceAll(conf, "include "+confValue(conf, "include"), "include "+secretPath)
	confPath := filepath.Join(dir, "cellserver.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	s := startBinary(t, data, confPath, "--cluster-announce-ip", "127.0.0.1", "--cluster-join", "127.0.0.1:1")
	pass := confValue(secret, "requirepass")
	if pass == "" {
		t.Fatal("the Secret sets no requirepass")
	}
	if got := s.ping(t, ""); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("PING without AUTH: %q, want -NOAUTH", got)
	}
	if got := s.ping(t, pass); got != "+PONG\r\n" {
		t.Errorf("PING after AUTH: %q", got)
	}
}
