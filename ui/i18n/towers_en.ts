<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="en" sourcelanguage="en">
<context>
    <name>towers::app::TrainingWorker</name>
    <message numerus="yes">
        <source>stopped early at step %1 of %2: %n evaluation(s) in a row without a better one</source>
        <translation>
            <numerusform>stopped early at step %1 of %2: %n evaluation in a row without a better one</numerusform>
            <numerusform>stopped early at step %1 of %2: %n evaluations in a row without a better one</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::ClassifyManyDialog</name>
    <message numerus="yes">
        <source>%n image(s) classified</source>
        <translation>
            <numerusform>%n image classified</numerusform>
            <numerusform>%n images classified</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::ClassifyPage</name>
    <message numerus="yes">
        <source>Classified %1 of %n file(s)</source>
        <translation>
            <numerusform>Classified %1 of %n file</numerusform>
            <numerusform>Classified %1 of %n files</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>; %n could not be read</source>
        <translation>
            <numerusform>; %n could not be read</numerusform>
            <numerusform>; %n could not be read</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>True &lt;b&gt;%1&lt;/b&gt;, predicted &lt;b&gt;%2&lt;/b&gt;: %n image(s), the surest first</source>
        <translation>
            <numerusform>True &lt;b&gt;%1&lt;/b&gt;, predicted &lt;b&gt;%2&lt;/b&gt;: %n image, the surest first</numerusform>
            <numerusform>True &lt;b&gt;%1&lt;/b&gt;, predicted &lt;b&gt;%2&lt;/b&gt;: %n images, the surest first</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>The %n wrong answer(s) the network was surest of, the surest first (each image&apos;s tooltip says what it was taken for): mislabelled images and look-alike classes show here.</source>
        <translation>
            <numerusform>The %n wrong answer the network was surest of, the surest first (each image&apos;s tooltip says what it was taken for): mislabelled images and look-alike classes show here.</numerusform>
            <numerusform>The %n wrong answers the network was surest of, the surest first (each image&apos;s tooltip says what it was taken for): mislabelled images and look-alike classes show here.</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::ConfigTree</name>
    <message numerus="yes">
        <source>%1: %n layer(s), from a model file</source>
        <translation>
            <numerusform>%1: %n layer, from a model file</numerusform>
            <numerusform>%1: %n layers, from a model file</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::DevicesPage</name>
    <message numerus="yes">
        <source>Judged on each tower&apos;s mean over the last %n report(s); a part is named when it takes %1 % of the step or more.</source>
        <translation>
            <numerusform>Judged on each tower&apos;s mean over the last report; a part is named when it takes %1 % of the step or more.</numerusform>
            <numerusform>Judged on each tower&apos;s mean over the last %n reports; a part is named when it takes %1 % of the step or more.</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n tower(s), one per checked GPU: %1</source>
        <translation>
            <numerusform>%n tower, one per checked GPU: %1</numerusform>
            <numerusform>%n towers, one per checked GPU: %1</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n tower(s)</source>
        <translation>
            <numerusform>%n tower</numerusform>
            <numerusform>%n towers</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n thread(s)</source>
        <translation>
            <numerusform>%n thread</numerusform>
            <numerusform>%n threads</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>&lt;b&gt;Waiting on the data:&lt;/b&gt; the tower(s) wait(s) for their batch %1 % of the step: the input pipeline is the bottleneck.</source>
        <translation>
            <numerusform>&lt;b&gt;Waiting on the data:&lt;/b&gt; the tower waits for its batch %1 % of its step: the input pipeline is the bottleneck.</numerusform>
            <numerusform>&lt;b&gt;Waiting on the data:&lt;/b&gt; the towers wait for their batch %1 % of the step: the input pipeline is the bottleneck.</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>&lt;b&gt;Waiting on the others:&lt;/b&gt; %1 wait(s) on the others %2 % of their step (communication)</source>
        <translation>
            <numerusform>&lt;b&gt;Waiting on the others:&lt;/b&gt; %1 waits on the others %2 % of its step (communication)</numerusform>
            <numerusform>&lt;b&gt;Waiting on the others:&lt;/b&gt; %1 wait on the others %2 % of their step (communication)</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>&lt;b&gt;Unbalanced:&lt;/b&gt; %1 compute(s) more than 25 % longer than the others; every step waits for the slowest tower.</source>
        <translation>
            <numerusform>&lt;b&gt;Unbalanced:&lt;/b&gt; %1 computes more than 25 % longer than the others; every step waits for the slowest tower.</numerusform>
            <numerusform>&lt;b&gt;Unbalanced:&lt;/b&gt; %1 compute more than 25 % longer than the others; every step waits for the slowest tower.</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>&lt;b&gt;Waiting on communication:&lt;/b&gt; %1 spend(s) up to %2 % of their step averaging gradients and waiting for the others.</source>
        <translation>
            <numerusform>&lt;b&gt;Waiting on communication:&lt;/b&gt; %1 spends %2 % of its step averaging gradients and waiting for the others.</numerusform>
            <numerusform>&lt;b&gt;Waiting on communication:&lt;/b&gt; %1 spend up to %2 % of their step averaging gradients and waiting for the others.</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::ErrorBanner</name>
    <message numerus="yes">
        <source>Shows the %n earlier message(s) under this one</source>
        <translation>
            <numerusform>Shows the earlier message under this one</numerusform>
            <numerusform>Shows the %n earlier messages under this one</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::HyperparameterForm</name>
    <message numerus="yes">
        <source> evaluation(s) without gain</source>
        <translation>
            <numerusform> evaluation without gain</numerusform>
            <numerusform> evaluations without gain</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n tower(s)</source>
        <translation>
            <numerusform>%n tower</numerusform>
            <numerusform>%n towers</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::ImportImagesDialog</name>
    <message numerus="yes">
        <source>%n file(s) are no image(s) and will be left out (%1).</source>
        <translation>
            <numerusform>%n file is no image and will be left out (%1).</numerusform>
            <numerusform>%n files are no images and will be left out (%1).</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::LayersDialog</name>
    <message numerus="yes">
        <source>%n channel(s) zero on every one of the %1 test images: %2</source>
        <translation>
            <numerusform>%n channel zero on every one of the %1 test images: %2</numerusform>
            <numerusform>%n channels zero on every one of the %1 test images: %2</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::LrFinderDialog</name>
    <message numerus="yes">
        <source>%n tower(s)</source>
        <translation>
            <numerusform>%n tower</numerusform>
            <numerusform>%n towers</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::MainWindow</name>
    <message numerus="yes">
        <source>The %n queued run(s) will not start.</source>
        <translation>
            <numerusform>The queued run will not start.</numerusform>
            <numerusform>The %n queued runs will not start.</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n run(s) wait in the queue and will not start. Close anyway?</source>
        <translation>
            <numerusform>%n run waits in the queue and will not start. Close anyway?</numerusform>
            <numerusform>%n runs wait in the queue and will not start. Close anyway?</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::ModelPage</name>
    <message numerus="yes">
        <source>%n tower(s)</source>
        <translation>
            <numerusform>%n tower</numerusform>
            <numerusform>%n towers</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::RunsPage</name>
    <message numerus="yes">
        <source>%n tower(s)</source>
        <translation>
            <numerusform>%n tower</numerusform>
            <numerusform>%n towers</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n checkpoint(s)</source>
        <translation>
            <numerusform>%n checkpoint</numerusform>
            <numerusform>%n checkpoints</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>towers::ui::TrainPage</name>
    <message numerus="yes">
        <source>Queued run %1: %2 on %3, %n tower(s), learning rate %4, seed %5</source>
        <translation>
            <numerusform>Queued run %1: %2 on %3, %n tower, learning rate %4, seed %5</numerusform>
            <numerusform>Queued run %1: %2 on %3, %n towers, learning rate %4, seed %5</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>Cleared the queue: %n run(s) will not start</source>
        <translation>
            <numerusform>Cleared the queue: %n run will not start</numerusform>
            <numerusform>Cleared the queue: %n runs will not start</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n run(s) queued; next: %1 on %2, %3</source>
        <translation>
            <numerusform>%n run queued; next: %1 on %2, %3</numerusform>
            <numerusform>%n runs queued; next: %1 on %2, %3</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n tower(s)</source>
        <translation>
            <numerusform>%n tower</numerusform>
            <numerusform>%n towers</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>New run in %1: %2 on %3, %n tower(s)</source>
        <translation>
            <numerusform>New run in %1: %2 on %3, %n tower</numerusform>
            <numerusform>New run in %1: %2 on %3, %n towers</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>The queue waits: %n run(s) will not start after this one</source>
        <translation>
            <numerusform>The queue waits: %n run will not start after this one</numerusform>
            <numerusform>The queue waits: %n runs will not start after this one</numerusform>
        </translation>
    </message>
</context>
</TS>
